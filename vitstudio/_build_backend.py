"""The build backend: setuptools' own (setuptools.build_meta), with its intermediate folders out of the source tree.

pip builds a checkout in place since 21.3, and setuptools then writes build/ and vitstudio.egg-info beside the code
on every `pip install .`. Each hook here runs setuptools' with a throwaway folder for both, given through the extra
config file distutils reads from $DIST_EXTRA_CONFIG ([build] build_base, [egg_info] egg_base): the tree is read,
never written. pyproject.toml names this module (backend-path "."); as part of the package the sdist carries it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  (the hooks not wrapped here: get_requires_for_build_*)


@contextlib.contextmanager
def _out_of_tree():
    with tempfile.TemporaryDirectory(prefix="vitstudio-build-") as tmp:
        config = Path(tmp) / "out_of_tree.cfg"
        config.write_text(f"[build]\nbuild_base = {Path(tmp) / 'build'}\n\n[egg_info]\negg_base = {tmp}\n")
        before = os.environ.get("DIST_EXTRA_CONFIG")
        os.environ["DIST_EXTRA_CONFIG"] = str(config)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("DIST_EXTRA_CONFIG", None)
            else:
                os.environ["DIST_EXTRA_CONFIG"] = before


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with _out_of_tree():
        return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with _out_of_tree():
        return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    with _out_of_tree():
        return build_meta.build_sdist(sdist_directory, config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with _out_of_tree():
        return build_meta.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    with _out_of_tree():
        return build_meta.prepare_metadata_for_build_editable(metadata_directory, config_settings)
