"""`vitstudio play`: a video file or a camera through the model, frame by frame, with an attention map on top;
the annotated stream to a video file and the per-frame predictions to JSON lines."""

from __future__ import annotations

import sys

from ..core.files import counted
from ..core.play import play_methods
from .common import COUNT, EXIT_OK, EXIT_USAGE, add_model_args, load_model_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("play", help="live predictions and attention on a video file or a camera")
    p.add_argument("source", help="a video file, or camera:N (camera:0 is the first camera)")
    add_model_args(p)
    p.add_argument("--method", choices=play_methods(), default=None,
                   help="the map drawn over each frame (default: none, predictions only)")
    p.add_argument("--out", metavar="VIDEO", help="write the annotated frames (.mp4 or .avi), one per frame read")
    p.add_argument("--json", metavar="FILE", help="per-frame predictions as JSON lines (frame, time_s, top)")
    p.add_argument("--frames", type=COUNT, default=None, help="stop after this many frames (a camera runs until "
                   "Ctrl+C otherwise)")
    p.add_argument("--live", action="store_true", help="analyse only the newest frame, skipping frames the model "
                   "is too slow for (always on for cameras; a file is then paced at its own frame rate)")
    p.add_argument("--quiet", action="store_true", help="no per-frame lines")
    p.set_defaults(handler=play_cmd)


def play_cmd(args) -> int:
    from ..core.inference import require_classifier
    from ..core.play.session import play
    from ..core.play.video import VideoSourceError, parse_source

    try:
        parse_source(args.source)  # a missing file is said before the model loads
    except VideoSourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    if not args.method:
        require_classifier(loaded)  # a headless model plays with a map only (its prediction would be empty)
    done, fps = 0, None
    try:
        for result, rate in play(loaded, args.source, args.method, out=args.out, json_path=args.json,
                                 live=True if args.live else None, max_frames=args.frames):
            done, fps = done + 1, rate or fps
            if not args.quiet:
                # the window's and the annotated frames' caption, padded so the latencies line up
                print(f"frame {result.index:5d}  {result.top1:<30}  {result.latency_ms:6.1f} ms", file=sys.stderr)
    except VideoSourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    speed = f", {fps:.1f} frames/s" if fps else ""
    print(f"{counted(done, 'frame')} analysed{speed}" + (f"; annotated video: {args.out}" if args.out else ""),
          file=sys.stderr)
    return EXIT_OK
