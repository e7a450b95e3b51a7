"""The Folder tab's Concepts page's parts (the page: pages/concepts_page.py): browse (concept_browser), read one
image (concept_image)."""
