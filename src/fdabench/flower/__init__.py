"""fdabench's round loop over Flower (`flwr`): the same FDA rounds, with each site a Flower SuperNode that holds
only its own data. Needs the `flower` extra (`uv pip install -e ".[flower]"`)."""
