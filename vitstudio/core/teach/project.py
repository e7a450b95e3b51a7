"""A Teach project on disk: `images/<class>/<file>` + `labels.csv` (path,label rows, paths relative to it: what
`vitstudio finetune --labels` reads) + `settings.json` (model, head recipe, recording rate); `vitstudio finetune
PROJECT` and the Training tab train on it as on its images/ (data/datasets.py). Any folder of class subfolders opens
as a project too (read-only: nothing is written into it unless a sample is added).

Samples added are copied in under a name made of their content hash, so the same frame added twice is one file and a
crash mid-write leaves no half file (`atomic_write_bytes`); labels.csv is rewritten whole, atomically, after each
change, from the folders themselves (the folders are the truth; the CSV is the index the other tools read)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from PIL import Image

from vitstudio.core.data.images import IMAGE_SUFFIXES, ImageReadError, check_file, image_size
from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import atomic_write_bytes, shown_path
from vitstudio.core.records import read_json_value

SETTINGS = "settings.json"
RECORDINGS = "recordings.json"  # {sample file name: the hold it was recorded in}: frames of one hold are split together
LABELS = "labels.csv"
IMAGES = "images"
RECIPES = ("quick", "teachable-machine")


class ProjectError(UserFacingError, ValueError):
    """A project that cannot be taught as it stands (one line: the class and what is missing)."""


@dataclass(frozen=True)
class TeachSettings:
    model: str | None = None  # what the head was taught on: a --model spec as the model bar named it (None: none yet)
    weights: str | None = None  # the --weights file that model was loaded with (None: its own)
    recipe: str = "quick"  # the head's fitter: `quick` (head_fit.py) or `teachable-machine` (heads.py)
    record_fps: float = 24.0  # hold to record: frames added per second (Teachable Machine's web app records 24)
    record_max: int = 0  # most frames one hold adds (0: no limit)
    seed: int = 0  # the validation split's shuffle
    augment: bool = False  # also fit on augmented views of the training samples (core/teach/augment.py)

    def __post_init__(self) -> None:
        for name in ("model", "weights"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip() or "\0" in value):
                raise ProjectError(f"{name} is {_shown(value)}: a model's name or path (leave it out for none).")
        if self.recipe not in RECIPES:
            raise ProjectError(f"recipe {_shown(self.recipe)} is not one of {', '.join(RECIPES)}.")
        if not _number(self.record_fps) or not (0 < self.record_fps <= 120):
            raise ProjectError(f"record_fps is {_shown(self.record_fps)}: frames per second, a number in (0, 120].")
        for name, top in (("record_max", 10**9), ("seed", 2**32 - 1)):
            value = getattr(self, name)
            if not _number(value) or value != int(value) or not 0 <= value <= top:
                raise ProjectError(f"{name} is {_shown(value)}: a whole number from 0 to {top:,}.")
            object.__setattr__(self, name, int(value))  # 3.0 in the file is 3
        if not isinstance(self.augment, bool):
            raise ProjectError(f"augment is {_shown(self.augment)}: true or false.")


def _number(value) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value) -> str:
    """A settings value as a message shows it: short, one line (a settings file may hold anything)."""
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, (str, int, float, bool, type(None))) else \
        repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class TeachProject:
    root: Path  # the project folder
    images: Path  # where the class folders are (root/images, or root itself for a plain class-folder tree)
    classes: tuple[str, ...]
    samples: dict[str, tuple[Path, ...]] = field(default_factory=dict)  # class -> its image files, sorted
    settings: TeachSettings = TeachSettings()
    skipped: tuple[tuple[str, str], ...] = ()  # files in class folders that are not readable images, with why

    @property
    def is_teach_project(self) -> bool:
        return self.images != self.root

    def labelled(self) -> list[tuple[Path, int]]:
        """(file, class index) of every sample, class by class."""
        return [(path, i) for i, name in enumerate(self.classes) for path in self.samples[name]]

    def check_trainable(self) -> None:
        """A ProjectError naming the classes a head cannot be taught with: fewer than two classes, a class with no
        sample, or one (Teachable Machine's 15 % rule, rounded up, puts a lone sample in validation: none is left to
        learn from)."""
        if len(self.classes) < 2:
            raise ProjectError(f"{self.root} has {len(self.classes)} class(es); teaching needs at least two (one "
                               f"folder of images per class under {self.images}).")
        empty = [c for c in self.classes if not self.samples[c]]
        if empty:
            raise ProjectError(f"class {', '.join(map(shown_path, empty))} has no samples: add some, or delete the "
                               f"class.")
        single = [c for c in self.classes if len(self.samples[c]) == 1]
        if single:
            raise ProjectError(f"class {', '.join(map(shown_path, single))} has one sample: the 15 % validation share "
                               f"(rounded up) takes it, leaving nothing to learn from; add at least one more.")


def open_project(folder: str | Path) -> TeachProject:
    """The project in `folder`: a Teach project (settings.json + images/), or any folder of class subfolders."""
    root = Path(folder)
    if not root.is_dir():
        raise ProjectError(f"{root} is not a folder (a Teach project, or a folder of class subfolders).")
    settings = read_settings(root)
    images = root / IMAGES if (root / IMAGES).is_dir() and (root / SETTINGS).is_file() else root
    samples, skipped = {}, []
    for class_dir in sorted(d for d in images.iterdir() if d.is_dir() and not d.name.startswith(".")):
        samples[class_dir.name] = tuple(_images_in(class_dir, skipped))
    return TeachProject(root, images, tuple(samples), samples, settings, tuple(skipped))


def _images_in(folder: Path, skipped: list) -> list[Path]:
    found = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_dir():
            continue
        try:
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                raise ImageReadError(path, "not an image file")
            check_file(path)
            image_size(path)  # the header: a damaged or truncated file is named here, not in the middle of a fit
            found.append(path)
        except ImageReadError as exc:
            skipped.append((str(path), exc.reason))
    return found


def read_settings(root: Path) -> TeachSettings:
    path = root / SETTINGS
    if not path.is_file():
        return TeachSettings()
    value = read_json_value(path, "project settings", "settings file")
    if not isinstance(value, dict):
        raise ProjectError(f"{path} is damaged: it should hold a JSON object.")
    known = {k: v for k, v in value.items() if k in TeachSettings.__dataclass_fields__}
    try:
        settings = TeachSettings(**known)
    except ProjectError as exc:
        raise ProjectError(f"{path} is damaged: {exc}") from None
    return replace(settings, **_from_project(root, settings.model, settings.weights))


def _from_project(root: Path, model: str | None, weights: str | None) -> dict:
    """A model folder or weights file the settings name by a relative path, as a path from the project (where the
    project was written), not from wherever the command runs; a bare name that is no file of the project (a timm
    name, a folder under models/) and a spec with a scheme (hf-hub:…) as they are."""
    def there(value: str | None) -> str | None:
        if value is None or Path(value).is_absolute() or ":" in value:  # none, absolute, or a scheme (hf-hub:…)
            return value
        path_like = "/" in value or "\\" in value or value.startswith(".")
        return str((root / value).absolute()) if path_like or (root / value).exists() else value

    return {"model": there(model), "weights": there(weights)}


def create_project(folder: str | Path, classes: list[str], settings: TeachSettings = TeachSettings()) -> TeachProject:
    """A new (or reopened) Teach project with these classes' folders, its settings and labels.csv written."""
    root = Path(folder)
    for name in classes:
        _check_class_name(name)
        (root / IMAGES / name).mkdir(parents=True, exist_ok=True)
    save_settings(root, settings)
    project = open_project(root)
    write_labels(project)
    return project


def save_settings(root: Path, settings: TeachSettings) -> None:
    atomic_write_bytes(Path(root) / SETTINGS, json.dumps(asdict(settings), indent=1).encode())


def recorded_spec(spec: str, weights: str | None = None) -> tuple[str, str | None]:
    """(spec, weights) as a project records them: a spec or weights file that is a path on disk made absolute (the
    project is taught again from another folder); a timm or hub name as given."""
    def absolute(value: str) -> str:
        return str(Path(value).absolute()) if Path(value).exists() else value

    return absolute(spec), (absolute(weights) if weights else None)


def _check_class_name(name: str) -> None:
    if not name.strip() or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise ProjectError(f"'{shown_path(name)}' cannot name a class (a folder name: not empty, no slash, not "
                           f"hidden).")


def add_images(project: TeachProject, name: str, images: list[Image.Image], recording: str | None = None
               ) -> TeachProject:
    """Frames (held to record, pasted) added to class `name` as PNGs named by their content; returns the project
    as it now is on disk, labels.csv rewritten. `recording`: the hold they were recorded in, kept in
    recordings.json (the frames written before a failed write too), so the validation split keeps them together."""
    _check_class_name(name)
    folder = project.images / name
    written = []
    try:
        for image in images:
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG")
            data = buffer.getvalue()
            atomic_write_bytes(folder / f"{hashlib.sha1(data).hexdigest()[:16]}.png", data)
            written.append(f"{hashlib.sha1(data).hexdigest()[:16]}.png")
    finally:
        if recording and written and project.is_teach_project:
            _remember_recording(project.root, written, recording)
    return _reopened(project)


def recordings(root: str | Path) -> dict[str, str]:
    """{sample file name: its recording} of a project ({} without recordings.json, or with a damaged one: the split
    then groups by near-duplicates alone)."""
    try:  # bounded, a regular file only: a FIFO or a link to /dev/zero there is no recordings file
        value = read_json_value(Path(root) / RECORDINGS, "a project's recordings", "recordings file", 64 << 20)
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _remember_recording(root: Path, names: list[str], recording: str) -> None:
    known = recordings(root)
    known.update(dict.fromkeys(names, recording))
    try:
        atomic_write_bytes(root / RECORDINGS, json.dumps(known, indent=0, sort_keys=True).encode())
    except OSError:  # a full disk: the frames are kept; only their grouping in the split is lost
        pass


def add_files(project: TeachProject, name: str, files: list[str | Path]) -> TeachProject:
    """Image files copied into class `name` (named by content, suffix kept); unreadable ones raise before any copy."""
    _check_class_name(name)
    for path in files:
        check_file(path)
    for path in files:
        data = Path(path).read_bytes()
        suffix = Path(path).suffix.lower()
        atomic_write_bytes(project.images / name / f"{hashlib.sha1(data).hexdigest()[:16]}{suffix}", data)
    return _reopened(project)


def remove_sample(project: TeachProject, path: str | Path) -> TeachProject:
    """One sample's file deleted from its class; a file that is not a sample of the project is refused."""
    path = Path(path)
    if not any(path in files for files in project.samples.values()):
        raise ProjectError(f"{shown_path(path.name)} is not a sample of this project.")
    path.unlink(missing_ok=True)
    return _reopened(project)


def delete_class(project: TeachProject, name: str) -> TeachProject:
    """Class `name` deleted with its samples (its folder, and anything else in it)."""
    import shutil

    if name not in project.classes:
        raise ProjectError(f"there is no class '{shown_path(name)}' to delete.")
    shutil.rmtree(project.images / name)
    return _reopened(project)


def rename_class(project: TeachProject, name: str, new: str) -> TeachProject:
    """Class `name` renamed `new` (its folder renamed: its samples go with it); a name taken is refused."""
    if name not in project.classes:
        raise ProjectError(f"there is no class '{shown_path(name)}' to rename.")
    if new != name:
        check_new_class(project, new, renaming=name)
        (project.images / name).rename(project.images / new)
    return _reopened(project)


def check_new_class(project: TeachProject, name: str, renaming: str | None = None) -> None:
    """A ProjectError (one line) when `name` cannot name a new class (or class `renaming` renamed): not a folder
    name, or one taken, compared case-folded (a case-insensitive disk would merge the two folders)."""
    _check_class_name(name)
    taken = [c for c in project.classes if c.casefold() == name.casefold() and c != renaming]
    folder = project.images / name
    if not taken and folder.exists() and not (renaming and folder.samefile(project.images / renaming)):
        taken = [name]  # a file of that name (the class itself on a case-insensitive disk is not taken)
    if taken:
        raise ProjectError(f"a class named '{shown_path(taken[0])}' exists already: choose another name.")


def _reopened(project: TeachProject) -> TeachProject:
    reopened = replace(open_project(project.root), settings=project.settings)
    write_labels(reopened)
    return reopened


def write_labels(project: TeachProject) -> None:
    """labels.csv beside settings.json (a Teach project only: a plain class-folder tree is never written to)."""
    if not project.is_teach_project:
        return
    text = io.StringIO()
    rows = csv.writer(text, lineterminator="\n")
    rows.writerow(["path", "label"])
    rows.writerows([path.relative_to(project.root).as_posix(), name]
                   for name in project.classes for path in project.samples[name])
    atomic_write_bytes(project.root / LABELS, text.getvalue().encode("utf-8", "surrogateescape"))
