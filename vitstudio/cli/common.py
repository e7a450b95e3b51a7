"""What the `vitstudio` commands share (the lowest floor of the command line): exit codes, the model and decoder
options, options generated from a core settings schema, loading the model a command names, running a core
generator with a progress bar, the note on files a folder walk left alone, and streams that print any name."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from ..core.fields import AT_LEAST_ONE, DECODERS, PRECISIONS, Range
from ..core.files import shown_path

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2
BATCH_HELP = "images per forward pass (default: 32 to 256, as many as keep one block's activations under 512 MB)"
SHOWN = "vitstudio.shown"  # the codecs error handler below


def _shown(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(shown_path(ch) if 0xDC80 <= ord(ch) <= 0xDCFF else ascii(ch)[1:-1] for ch in bad), exc.end


codecs.register_error(SHOWN, _shown)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors (an option out of its range, an unknown option, a missing argument) are
    one `error:` line, as every other refusal of the command line, instead of the usage block and a second line."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {' '.join(message.split())} (`{self.prog} --help` lists the options)\n")


def checked(kind: type, within: Range | None = None):
    """argparse's `type` for a number of `kind` within a field spec's range: a value outside is refused while the
    command line is parsed (one line, exit 2), before the command imports torch or loads a model."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if within is not None and value not in within:
            raise argparse.ArgumentTypeError(within.refusal(value))
        return value

    parse.__name__ = kind.__name__  # what argparse names in "invalid int value"
    return parse


COUNT = checked(int, AT_LEAST_ONE)  # images per forward, classes listed, steps: at least one
BATCH_SIZE = dict(type=COUNT, default=None, help=BATCH_HELP)


def existing(text: str) -> str:
    """argparse's `type` for an input file or folder: one that is not there is refused while parsing, not after the
    model has loaded. A link is left to the reader, which says whether it dangles or loops."""
    import os

    if not os.path.lexists(text):
        raise argparse.ArgumentTypeError(f"no such file or folder: {shown_path(text)}")
    return text


NO_IMAGES = "no image files found in the given paths"


def has_images(paths) -> bool:
    """Whether the files and folders given hold anything to read (stops at the first: an empty folder is a usage
    error said before the model loads, not a pass over nothing)."""
    from ..core.data.images import expand_path_names

    return next(iter(expand_path_names(paths)), None) is not None


@contextlib.contextmanager
def printable_names() -> Iterator[None]:
    """While a command runs, stdout and stderr write a name held as surrogate escapes (a class folder or a file named
    in bytes that are not UTF-8) as \\xNN, as `shown_path` shows it, instead of stopping the command with a
    UnicodeEncodeError on a strict UTF-8 stdout (a desktop locale's), and a character the stream's encoding lacks (a
    Windows pipe's cp1252) as its \\u escape. JSON output stays ASCII (json.dumps' default), so no such escape ends
    up in a JSON string. A stream set to surrogateescape (the C locale's) keeps writing a name's own bytes."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) in ("strict", "backslashreplace") and hasattr(stream, "reconfigure"):
            changed.append((stream, stream.errors))
            stream.reconfigure(errors=SHOWN)
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(ValueError, OSError):  # a stream the command closed
                stream.reconfigure(errors=errors)


class _StderrLines(logging.Handler):
    """A warning as one `warning:` line on the stderr of the moment (a test's captured one too)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"warning: {shown_path(' '.join(record.getMessage().split()))}", file=sys.stderr)


@contextlib.contextmanager
def records_said() -> Iterator[None]:
    """While a command runs, a record of the app set aside (a damaged tags.json or views.json renamed `.bad`:
    `records.set_aside`) is said on stderr, one `warning:` line each, instead of silently."""
    from ..core.records import records_log

    handler = _StderrLines(logging.WARNING)
    records_log.addHandler(handler)
    try:
        yield
    finally:
        records_log.removeHandler(handler)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="timm name[.tag], hf-hub:ORG/REPO, local-dir:DIR, a folder under models/, a seed "
                   "checkpoint, or custom:img=..,patch=..,width=..,depth=..,heads=..,classes=.. (default: the bundled "
                   "demo, digits-vit, a small ViT for handwritten digits)")
    p.add_argument("--weights", help="weights file for the named architecture (.safetensors/.pth/.pt/.bin/.npz)")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="auto (bf16 autocast on GPUs that support it, fp32 elsewhere; the default), fp32, or "
                        "bf16/fp16 autocast")
    p.add_argument("--classes", help="CLIP-style models (open_clip:...): classes from words, \"ant, bee, wasp\", a "
                   "file with one name per line, or a folder (its class folders' names); a zero-shot head from the "
                   "text tower")
    p.add_argument("--prompt", help="with --classes: one prompt template, e.g. \"a photo of a {}\"; \"{}\" = the raw "
                   "names (default: the model's own templates, else OpenCLIP's 80 ImageNet ones, averaged)")


def add_decoder_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decoder", default="auto", choices=DECODERS,
                   help="auto: JPEGs decoded and preprocessed on a GPU (torchvision), PIL on a CPU; tensor / pil "
                        "force one (unreadable-by-tensor files always fall back to PIL)")


def add_config_options(parser, settings, presets: dict | None = None) -> None:
    """One option per Setting (as transformers' HfArgumentParser adds one per dataclass field), named after its
    field (`--min-lr-ratio`) with its earlier names as aliases, grouped by section. Every option defaults to None:
    only the settings given override the preset. A number's range is checked as it is parsed (`checked`: before
    torch loads); what only the whole config can check (min <= max, a crop with its interpolation) by
    TrainConfig.validate(), which the GUI's form runs too."""
    groups: dict[str, object] = {}
    for s in settings:
        group = groups.get(s.section)
        if group is None:
            group = groups[s.section] = parser.add_argument_group(f"{s.section} settings")
        kw: dict = dict(dest=s.name, default=None, help=_option_help(s, presets))
        if s.kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            # a range (and a tuple's order) is checked while parsing, in the words the Training tab uses
            kw["type"] = checked(s.kind) if s.kind in (int, float) else s.kind
            kw["action"], kw["setting"] = SettingAction, s
            if s.choices is not None:
                kw["choices"] = list(s.choices)
            if s.length:
                kw["nargs"] = s.length if s.length > 0 else "*"
                kw["metavar"] = tuple(p.upper() for p in s.parts) if s.length > 0 else (s.parts or ("VALUE",))[0]
        group.add_argument(s.flag, *s.aliases, **kw)


class SettingAction(argparse.Action):
    """Stores a setting's value once its setting accepts it (`Setting.check`: its range, each item of a tuple, their
    order): refused while parsing, before torch loads, in the very sentence the Training tab's status line says."""

    def __init__(self, *args, setting, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        value = tuple(values) if isinstance(values, list) else values
        try:
            self.setting.check(value)
        except ValueError as exc:
            parser.exit(EXIT_USAGE, f"error: {exc}\n")
        setattr(namespace, self.dest, values)


def _option_help(s, presets: dict | None) -> str:
    from ..core.train.schema import describe_default

    text = s.help
    if s.range is not None:
        text += f"; in {s.range}"
    if s.suggestions and s.choices is None and not any(v in text for v in s.suggestions):
        text += f"; e.g. {', '.join(s.suggestions)}"
    return f"{text} (default: {describe_default(s, presets)})".replace("%", "%%")


def add_ray_arg(p: argparse.ArgumentParser) -> None:
    """`--ray [ADDRESS]` on a command whose model pass runs over a folder (`on_ray` runs it there)."""
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the model pass on a Ray cluster: at ADDRESS (as `ray start --head` prints it, e.g. "
                        "10.0.0.5:6379), else at RAY_ADDRESS, else a local instance; the results land in this "
                        "machine's cache and outputs, the same as without it (pip install 'vitstudio[cluster]')")


def on_ray(args):
    """The context a command's handler runs in: every folder pass on the cluster `--ray` names, else as it is."""
    address = getattr(args, "ray", None)
    if address is None:
        return contextlib.nullcontext()
    from ..core.folder.ray_cluster import RayJobError, on_cluster

    if address and Path(address).exists():  # `--ray FOLDER`: the folder was taken for the address
        raise RayJobError(f"--ray took {shown_path(address)} for the cluster's address: put --ray after the paths, "
                          f"or give the address (--ray HOST:6379)")
    return on_cluster(address or None)


def add_view_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--view", metavar="NAME", help="only the images that the view NAME, saved for the folder given, "
                   "selects now (`vitstudio views FOLDER` lists them)")


def apply_view(args, attr: str, dataset: bool = False) -> bool:
    """`resolve_view`; False once the reason it cannot is printed."""
    try:
        resolve_view(args, attr, dataset)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


def resolve_view(args, attr: str, dataset: bool = False) -> None:
    """--view NAME: `args.<attr>` (one folder) becomes the images the view selects, or (`dataset`) a labels file of
    them with their class folders (a view is a dataset); a ValueError says why it cannot. A view with rules on the
    model's columns (prediction, confidence: saved on the Folder tab) reads them with --model's model, loaded here
    once (`load_model_from_args` hands the command the same one)."""
    name = getattr(args, "view", None)
    if not name:
        return
    from ..core.folder.view_select import view_files, view_labels_file

    if dataset and getattr(args, "labels", None):
        raise ValueError("give --view NAME or --labels FILE.csv, not both (a view's images keep their class folders)")
    given = getattr(args, attr)
    folders = given if isinstance(given, list) else [given]
    if len(folders) != 1 or not folders[0] or not Path(folders[0]).is_dir():
        raise ValueError("--view NAME goes with one folder, the one the view was saved for")
    loaded = view_model(args, folders[0], name)
    if dataset:
        setattr(args, attr, str(view_labels_file(folders[0], name, loaded)))
        return
    files = view_files(folders[0], name, loaded)
    if not files:
        raise ValueError(f"the view {name!r} selects no image of {folders[0]} now")
    setattr(args, attr, [str(f) for f in files])


def view_model(args, folder: str, name: str, saved: bool = True):
    """The model a view's rules on prediction or confidence need, loaded once: --model's, else (`saved`) the model
    the view was saved with (the Folder tab records it; the command then runs with it), said in one line on stderr;
    None when its rules read only the folder's columns or there is neither (`view_files` then says to give one)."""
    from ..core.folder.views import model_fields, saved_model, view_rules

    rules = view_rules(folder, name)
    kept = saved_model(folder, name) if saved and model_fields(rules) else None
    given = (getattr(args, "model", None), getattr(args, "weights", None))
    if kept is not None and not given[0]:
        args.model, args.weights = kept
        print(f"note: the view {name!r} reads the predictions of {_model_named(*kept)}, the model it was saved "
              f"with (--model gives another)", file=sys.stderr)
    elif kept is not None and not _same_model(kept, given):
        print(f"note: the view {name!r} was saved with {_model_named(*kept)}; its rules on "
              f"{', '.join(model_fields(rules))} read {_model_named(*given)}'s predictions (--model)", file=sys.stderr)
    if not model_fields(rules) or not getattr(args, "model", None):
        return None
    loaded = load_model_from_args(args)
    if loaded is None:
        raise ValueError(f"the view {name!r} needs the model's predictions, and the model could not be loaded")
    return loaded


def _model_named(spec: str, weights: str | None = None) -> str:
    from ..core.models.demo import friendly_name

    return friendly_name(spec) + (f" (weights {weights})" if weights else "")


def _same_model(a: tuple, b: tuple) -> bool:
    """Whether two (spec, weights) name the same model (a path given relative or absolute alike)."""
    import os

    return [os.path.abspath(p) if p and os.path.exists(p) else p for p in a] == \
        [os.path.abspath(p) if p and os.path.exists(p) else p for p in b]


def print_fit(loaded, embedded, roots) -> dict | None:
    """When the model does not fit the folder (most images unlike its training data, class folders that are not its
    classes), the window's banner's sentences as `warning:` lines on stderr; the fit for a command's JSON (None for
    a model without classes)."""
    from ..core.folder.model_fit import fit_of

    fit = fit_of(loaded, embedded, roots)
    for line in fit.warnings() if fit is not None else ():
        print(f"warning: {line}", file=sys.stderr)
    return fit.to_dict() if fit is not None else None


def print_ignored(ignored: list[tuple[str, str]]) -> None:
    """The files a folder walk met and left alone (notes.txt, labels.csv), one line each on stderr: not failures."""
    print_left_out(ignored, "ignored")


LEFT_OUT_SHOWN = 20  # inputs named one by one; past them a count


def print_left_out(items, word: str = "skipped") -> None:
    """Inputs a command left out, `WORD PATH: why` on stderr, the first LEFT_OUT_SHOWN of them, then one line
    counting the rest with their commonest reason: a labels file of a million missing rows is 21 lines, not a
    million. `items`: (path, why) pairs, or a {path: why} dict."""
    from collections import Counter

    items = list(items.items()) if isinstance(items, dict) else list(items)
    for path, why in items[:LEFT_OUT_SHOWN]:
        print(f"{word} {shown_path(path)}: {shown_path(str(why))}", file=sys.stderr)
    rest = items[LEFT_OUT_SHOWN:]
    if rest:
        why, n = Counter(str(why) for _, why in rest).most_common(1)[0]
        also = f"{n:,} of them: {shown_path(why)}" if n < len(rest) else shown_path(why)
        print(f"{word} {len(rest):,} more ({also})", file=sys.stderr)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def load_model_from_args(args):
    """The model that --model/--weights/--device/--precision name, or None once the error is printed. Loaded once
    per command: a second call (after --view needed it) returns the same model."""
    if getattr(args, "loaded_model", None) is not None:
        return args.loaded_model
    args.loaded_model = _model_from_args(args)
    return args.loaded_model


def _model_from_args(args):
    from ..core.models.loading import ModelLoadError, load_model

    if args.model is None:
        from ..core.models.demo import DEMO_NAME, bundled_demo

        demo = bundled_demo()
        if demo is None:
            print(f"error: give --model (the bundled demo, {DEMO_NAME}, is not installed)", file=sys.stderr)
            return None
        print(f"note: no --model given: the bundled demo, {DEMO_NAME} (handwritten digits)", file=sys.stderr)
        args.model = str(demo)
    progress = None
    if sys.stderr.isatty():
        def progress(done, total, message):
            pct = f"{100 * done / total:5.1f}%" if total else f"{done / 1e6:.1f} MB"
            print(f"\r{message}: {pct}", end="", file=sys.stderr, flush=True)
    try:
        loaded = load_model(args.model, args.weights, args.device, args.precision, progress=progress)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    for note in loaded.notes:  # e.g. a run that did not finish: its weights are not the run's last word
        print(f"note: {note}", file=sys.stderr)
    return _with_classes(loaded, args)


def _with_classes(loaded, args):
    """--classes / --prompt: the zero-shot head of a CLIP-style model (None once the error is printed)."""
    classes, prompt = getattr(args, "classes", None), getattr(args, "prompt", None)
    if classes is None:
        if prompt is not None:
            print("error: --prompt goes with --classes", file=sys.stderr)
            return None
        return loaded
    from ..core.models.zeroshot import parse_classes, with_classes

    try:
        return with_classes(loaded, parse_classes(classes), prompt)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def drain(gen, quiet: bool):
    """Run a core generator with a progress bar; returns its result."""
    bar, last_message = None, None
    resume = gen.__next__
    try:
        while True:
            rec, resume = resume(), gen.__next__
            try:
                bar, last_message = _show(rec, quiet, bar, last_message)
            except KeyboardInterrupt:
                # Ctrl+C while a record was shown here: handed to the core at its yield, so its own handling runs (a
                # training run writes status "interrupted", not left "running"); what it does not handle comes back
                resume = lambda: gen.throw(KeyboardInterrupt())  # noqa: E731
    except StopIteration as stop:
        return stop.value
    finally:
        if bar is not None:
            bar.close()


def _show(rec, quiet: bool, bar, last_message):
    """Print one record of a core generator (warnings even when quiet); returns the bar and the last message."""
    from tqdm import tqdm

    from ..core.jobs import Progress
    from ..core.train.engine import EpochMetrics, HeadStart, RunWarning, StepProgress

    if isinstance(rec, RunWarning) and not rec.update:  # printed even when quiet: it needs the user
        print(f"warning: {rec.message}", file=sys.stderr)
    elif isinstance(rec, RunWarning) and not rec.message:
        print(f"note: the {rec.kind} warning above no longer holds", file=sys.stderr)
    if quiet:
        return bar, last_message
    if isinstance(rec, StepProgress):
        if bar is None or bar.total != rec.steps:
            bar = tqdm(total=rec.steps, file=sys.stderr, leave=False, disable=None)  # None: off when not a tty
        bar.n = rec.step
        bar.set_description(f"epoch {rec.epoch + 1}/{rec.epochs}")
        bar.set_postfix(loss=f"{rec.loss:.3f}", lr=f"{rec.lr:.2e}", ips=f"{rec.img_per_s:.0f}",
                        eta=f"{rec.eta_s:.0f}s")
        bar.refresh()
    elif isinstance(rec, EpochMetrics):
        if bar is not None:
            bar.close()
            bar = None
        star = " *" if rec.best else ""
        print(f"epoch {rec.epoch + 1}: train loss {rec.train_loss:.4f} acc {rec.train_acc:.4f} | "
              f"val loss {rec.val_loss:.4f} acc {rec.val_acc:.4f} | lr {rec.lr:.2e} | {rec.seconds:.1f}s{star}",
              file=sys.stderr)
    elif isinstance(rec, HeadStart) and rec.val_acc is not None:
        print(f"before any step (zero-shot: the head starts from the class names): val loss "
              f"{rec.val_loss:.4f} acc {rec.val_acc:.4f}", file=sys.stderr)
    elif isinstance(rec, Progress) and rec.message and rec.message != last_message:
        last_message = rec.message
        print(rec.message, file=sys.stderr)
    return bar, last_message
