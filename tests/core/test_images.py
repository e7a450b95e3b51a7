"""The bad-image zoo: every failure is a clear per-file message and a batch goes on."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from vitstudio.core.data.images import ImageReadError, expand_paths, read_image


def _save(img: Image.Image, path, **kw):
    img.save(path, **kw)
    return path


def test_rgb_jpeg_roundtrip(photos):
    """A JPEG photo reads as RGB 512×512."""
    img = read_image(photos["astronaut"])
    assert img.mode == "RGB" and img.size == (512, 512)


def test_exif_orientation_is_applied(tmp_path):
    """EXIF orientation 6 is applied (transposed, red on top, blue at bottom)."""
    # a 40x20 image, left half red, right half blue, tagged "rotate 90 CW" (orientation 6)
    arr = np.zeros((20, 40, 3), np.uint8)
    arr[:, :20] = (255, 0, 0)
    arr[:, 20:] = (0, 0, 255)
    exif = Image.Exif()
    exif[0x0112] = 6
    path = _save(Image.fromarray(arr), tmp_path / "rot.jpg", exif=exif, quality=95)
    out = np.asarray(read_image(path))
    assert out.shape == (40, 20, 3)  # transposed
    assert out[2, 10, 0] > 200 and out[-3, 10, 2] > 200  # red on top, blue at the bottom after rotation


def test_palette_and_transparency_on_white(tmp_path):
    """Transparent RGBA/LA composited on white; palette GIF becomes RGB."""
    rgba = Image.new("RGBA", (8, 8), (255, 0, 0, 0))  # fully transparent red
    rgba.putpixel((0, 0), (0, 255, 0, 255))
    out = np.asarray(read_image(_save(rgba, tmp_path / "a.png")))
    assert tuple(out[4, 4]) == (255, 255, 255)  # transparent -> white background
    assert tuple(out[0, 0]) == (0, 255, 0)
    pal = rgba.convert("RGB").convert("P", palette=Image.Palette.ADAPTIVE)
    assert read_image(_save(pal, tmp_path / "p.gif")).mode == "RGB"
    la = Image.new("LA", (4, 4), (0, 0))
    assert tuple(np.asarray(read_image(_save(la, tmp_path / "la.png")))[0, 0]) == (255, 255, 255)


def test_grayscale_cmyk_16bit(tmp_path):
    """L → grey RGB, CMYK red stays red, 16-bit PNG scaled by its range (mid-grey ≈ 128)."""
    gray = read_image(_save(Image.new("L", (5, 5), 77), tmp_path / "g.png"))
    assert gray.mode == "RGB" and tuple(np.asarray(gray)[0, 0]) == (77, 77, 77)
    cmyk = read_image(_save(Image.new("CMYK", (5, 5), (0, 255, 255, 0)), tmp_path / "c.jpg"))
    r, g, b = np.asarray(cmyk)[2, 2]
    assert r > 200 and g < 60 and b < 60
    arr16 = np.full((6, 6), 65535 // 2, dtype=np.uint16)
    img16 = Image.fromarray(arr16)
    assert img16.mode.startswith("I;16")
    out = np.asarray(read_image(_save(img16, tmp_path / "d.png")))
    assert abs(int(out[0, 0, 0]) - 128) <= 1  # scaled by the 16-bit range, not clipped to white


def test_animated_gif_first_frame(tmp_path):
    """An animated GIF reads as its first frame."""
    frames = [Image.new("RGB", (6, 6), c) for c in ((255, 0, 0), (0, 0, 255))]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50)
    out = np.asarray(read_image(path))
    assert out[0, 0, 0] > 200 and out[0, 0, 2] < 50


@pytest.mark.parametrize("case, expected", [
    ("missing", "not found"),
    ("folder", "folder"),
    ("empty", "empty"),
    ("text", "not an image"),
    ("truncated", "truncated"),
    ("garbage_png", "corrupt"),
])
def test_bad_files_give_clear_messages(tmp_path, photos, case, expected):
    """missing/folder/empty/text/truncated/corrupt PNG raise ImageReadError with the reason and the path. [parametrised
    ×6]
    """
    path = tmp_path / f"{case}.jpg"
    if case == "folder":
        path.mkdir()
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "text":
        path.write_text("hello, I am not a JPEG")
    elif case == "truncated":
        path.write_bytes(photos["astronaut"].read_bytes()[:5000])
    elif case == "garbage_png":
        buf = io.BytesIO()
        Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, "PNG")
        data = bytearray(buf.getvalue())
        data[60:80] = b"\x00" * 20  # corrupt the IDAT payload, keep the header
        path = tmp_path / "garbage.png"
        path.write_bytes(bytes(data))
    with pytest.raises(ImageReadError) as info:
        read_image(path)
    assert expected in info.value.reason
    assert str(path) in str(info.value)


def test_a_format_is_decided_by_content_not_by_name(tmp_path, photos):
    """A JPEG named .heic (a phone's export) is read as the JPEG it is; a real HEIC is refused naming its format
    (issue 29, item 19)."""
    from vitstudio.core.data.images import check_file

    named = tmp_path / "export.heic"
    named.write_bytes(photos["astronaut"].read_bytes())
    assert read_image(named).size == Image.open(photos["astronaut"]).size
    heic = tmp_path / "phone.heic"
    heic.write_bytes(b"\x00\x00\x00\x18ftypheic" + bytes(64))
    with pytest.raises(ImageReadError, match="HEIC is not supported; convert to JPEG/PNG"):
        check_file(heic)


def test_decompression_bomb_refused(tmp_path, monkeypatch):
    """An image over MAX_IMAGE_PIXELS raises "too large"."""
    path = _save(Image.new("RGB", (100, 100)), tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5000)
    with pytest.raises(ImageReadError, match="too large"):
        read_image(path)


def test_unreadable_file(tmp_path, monkeypatch):
    """A failed permission check (os.access mocked) raises "permission denied"."""
    path = _save(Image.new("RGB", (4, 4)), tmp_path / "locked.png")
    # root can read anything, so simulate the permission check failing
    monkeypatch.setattr("vitstudio.core.data.images.os.access", lambda p, mode: False)
    with pytest.raises(ImageReadError, match="permission denied"):
        read_image(path)


def test_expand_paths_folders_sorted_and_files_kept(tmp_path):
    """Folders expand recursively to sorted image files (case-insensitive extensions, .txt skipped); an explicit file is
    kept as given.
    """
    (tmp_path / "sub").mkdir()
    for name in ("b.jpg", "a.PNG", "notes.txt", "sub/c.webp"):
        (tmp_path / name).write_bytes(b"x")
    found = [p.relative_to(tmp_path).as_posix() for p in expand_paths([tmp_path])]
    assert found == ["a.PNG", "b.jpg", "sub/c.webp"]
    assert list(expand_paths([tmp_path / "notes.txt"])) == [tmp_path / "notes.txt"]
