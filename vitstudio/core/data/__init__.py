"""Images and datasets: safe reading, folder datasets and splits, the decoded-image cache, device augmentation."""
