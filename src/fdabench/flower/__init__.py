"""fdabench's round loop over Flower (`flwr`): the same FDA rounds, with each site a Flower SuperNode that holds
only its own data. Needs the `flower` extra (`uv pip install -e ".[flower]"`)."""

# The run's dropout policy and its waits (`fdabench.flower.transport`): the defaults of the apps' run config, of
# `simulate`/`deploy_locally` and of `fdabench flower`. Stated here, where nothing imports Flower.
DROPOUT_POLICIES = ("fail", "wait", "skip")
DEFAULT_DROPOUT = "fail"
#: seconds a site has to answer a message
DEFAULT_TIMEOUT_SECONDS = 600.0
#: under the `wait` policy, how long the server keeps asking a site that does not answer
DEFAULT_WAIT_SECONDS = 600.0
