"""The published papers as data: their numbers (`published`) and the protocols that produced them
(`protocols`). Pure data and pure functions of a cell's recorded configuration; imports nothing of fdabench,
so params validation and the report can both read it."""
