"""The Folder tab: a whole folder through the model (table, map, review, duplicates, sorting)."""
