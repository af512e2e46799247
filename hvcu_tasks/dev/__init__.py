"""Development stand-ins: the bundled smoke sample and tiny randomly-initialised models."""
