"""Widgets shared by every area: the image strip, the model bar and card, the map view."""
