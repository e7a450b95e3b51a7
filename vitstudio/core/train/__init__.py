"""Fine-tuning: recipes, the training engine, run folders, evaluation, distributed launch."""
