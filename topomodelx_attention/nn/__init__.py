"""Neural-network layers: the shared attention core and the model families."""
