"""The explorers: predictions, attention, embeddings, model internals and Compare."""
