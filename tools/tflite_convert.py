"""Convert the usc-mobile networks (pytorchcv, ``pretrained=False``, 1×3×224×224) to TFLite files, as
a user converting a PyTorch model would: PyTorch → ONNX here, ONNX → TFLite with ``onnx2tf`` (which
needs TensorFlow, so it runs from its own virtual environment, ``--onnx2tf``).

    python tools/tflite_convert.py --usc ../shared/data/usc-mobile --out /tmp/usc_tflite \\
        --onnx2tf /tmp/tfenv/bin/onnx2tf

Resumable: a network whose ``NAME.tflite`` is in ``--out`` is skipped; what failed, and why, is one
line of ``--out``/failed.jsonl. onnx2tf reads a calibration-image file from its working folder (and
would download it for its int8 path): random images stand in, as only the fp32 file is kept.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

FAILED = "failed.jsonl"
CALIBRATION = "calibration_image_sample_data_20x128x128x3_float32.npy"


def export_onnx(name: str, path: Path) -> None:
    from infercast.compat import import_torchvision

    import_torchvision()
    import torch
    from pytorchcv.model_provider import get_model

    module = get_model(name, pretrained=False).eval()
    torch.onnx.export(
        module,
        (torch.zeros(1, 3, 224, 224),),
        str(path),
        dynamo=False,
        input_names=["input"],
        opset_version=13,
    )


def failed_conversions(folder: Path) -> list[dict[str, str]]:
    """The networks the converter failed on, each with why (``model``, ``reason``)."""
    path = folder / FAILED
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def convert(name: str, out: Path, onnx2tf: str, timeout_s: float) -> str | None:
    """Write ``out/NAME.tflite``; the reason it failed, or None."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        np.save(work / CALIBRATION, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
        try:
            export_onnx(name, work / f"{name}.onnx")
        except Exception as error:
            return f"ONNX export: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
        try:
            done = subprocess.run(
                [onnx2tf, "-i", f"{name}.onnx", "-o", "saved", "-n"],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return f"onnx2tf ran past {timeout_s:g} s"
        result = work / "saved" / f"{name}_float32.tflite"
        if done.returncode != 0 or not result.is_file():
            lines = [line for line in (done.stderr + done.stdout).splitlines() if "Error" in line]
            return f"onnx2tf exit {done.returncode}: {(lines or ['no message'])[-1][:200]}"
        shutil.copyfile(result, out / f"{name}.tflite")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--usc", type=Path, required=True, help="the usc-mobile data folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--onnx2tf", required=True, help="the onnx2tf command of a TensorFlow environment")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = sorted(pd.read_csv(args.usc / "tflite_cnn_e2e.csv", usecols=["model"])["model"])
    failed = {f["model"] for f in failed_conversions(args.out)}
    todo = [n for n in names if not (args.out / f"{n}.tflite").exists() and n not in failed]
    for done, name in enumerate(todo, 1):
        reason = convert(name, args.out, args.onnx2tf, args.timeout_s)
        if reason is not None:
            with (args.out / FAILED).open("a") as handle:
                handle.write(json.dumps({"model": name, "reason": reason}) + "\n")
        print(f"[{done}/{len(todo)}] {name}: {reason or 'ok'}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
