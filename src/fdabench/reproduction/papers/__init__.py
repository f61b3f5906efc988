"""The published papers as data: their numbers (`published`) and the protocols that produced them
(`protocols`). Pure data and pure functions of a cell's recorded configuration; imports nothing of fdabench outside
this package, so the paper-vs-ours page, the check of an experiment's `published:` key and the figures' published
marks can all read it."""
