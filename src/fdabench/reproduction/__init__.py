"""The reproduction tooling, a package of its own: the published papers as data (`papers`: their numbers and the
protocols that produced them), the paper-vs-ours page (`paper_vs_ours`), the reproduction archive (`archive`,
`staleness`) and its code equivalences (`equivalence`). It depends on the library; the library never imports it
(tests/repository/test_architecture.py): the command line and the workflow hand its checks and published values
to the library where they are needed."""
