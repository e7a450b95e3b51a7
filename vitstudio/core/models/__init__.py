"""Models: what exists (catalog, hub), loading any source into a LoadedModel, devices, model cards, export."""
