"""Models: the providers and their specs, aliases, prices, the scripted model, and model errors."""
