"""`fdabench bench gpu`: one command that checks a CUDA machine and measures it within a time budget (issue 40).

Stages, in order, each with its share of the budget (`budget`): the CUDA tests (`pytest -m gpu`); the `paper_cpu`
FMNIST noise-0.4 FedGP cells one by one and as cohorts; K cells packed onto the GPU as separate processes; one
training step of the DomainBed tables' models and the GPU-hours it predicts per published table (`forecast`);
and one small cell end to end on the GPU and on the CPU. `run` writes one JSON (`report.FORMAT`) and a
Markdown table made from it after every stage; `--dry-run` runs the same stages on the CPU at toy sizes."""
