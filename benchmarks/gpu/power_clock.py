"""The SM clock and board power of sustained kernels, read through NVML while they run.

What a power limit does to a training step depends on how the SM clock falls as the board's
power rises. This script reads both (NVML: SM clock, board power, energy counter, the clock-event
reasons) while each of these runs for several seconds, back to back:

- ``idle`` and ``sleep`` (a one-thread spin kernel: the GPU busy at its clock, nearly no switching);
- ``gemm``: a bf16 8192^3 product on random data, back to back (compute-bound, the most power);
- ``duty_D``: the same product followed each time by a spin kernel sized so the products fill a
  fraction D of the time. Under the power limit the firmware picks the clock at which the
  average power meets the limit, so the clock reached at each D traces how the product's power
  grows with the clock (``power = idle_part + D * gemm_power(f)``) without changing any setting;
- ``gemm_zeros``: the same product on zeros (data-dependent switching power);
- ``copy``: a device-to-device copy (HBM-bound);
- ``fp8``: an fp8 (e4m3) product through ``torch._scaled_mm`` where the build has it;
- whole eager layers, forward + backward back to back (Llama 3 8B, GPT-3 175B TP 8 with SP).

No GPU setting is changed. Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/power_clock.py OUT.json [dvfs]

``dvfs``: bf16 and fp8 products and a Llama 3 8B layer, each back to back and at several duties.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

try:
    import pynvml
except ImportError:  # the machine's image has nvidia-ml-py; without it only timings are written
    pynvml = None

BF16 = torch.bfloat16
DUTIES = (0.8, 0.65, 0.5, 0.35, 0.2)


class Sampler:
    """Samples NVML every ``period_s`` on a thread: (t, sm MHz, mem MHz, W, event reasons, C)."""

    def __init__(self, period_s: float = 0.01) -> None:
        self.period_s = period_s
        self.rows: list[tuple[float, int, int, float, int, int]] = []
        self.energy: list[tuple[float, float]] = []  # (t, mJ)
        self._stop = threading.Event()
        self.handle = None
        if pynvml is not None:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def static(self) -> dict[str, Any]:
        if self.handle is None:
            return {}
        h, out = self.handle, {}
        readers: dict[str, Callable[[], Any]] = {
            "power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1e3,
            "enforced_power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
            "default_power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1e3,
            "power_limit_range_w": lambda: [
                v / 1e3 for v in pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
            ],
            "max_sm_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_mem_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "app_sm_mhz": lambda: pynvml.nvmlDeviceGetApplicationsClock(h, pynvml.NVML_CLOCK_SM),
            "default_app_sm_mhz": lambda: pynvml.nvmlDeviceGetDefaultApplicationsClock(
                h, pynvml.NVML_CLOCK_SM
            ),
            "supported_sm_mhz": lambda: sorted(
                pynvml.nvmlDeviceGetSupportedGraphicsClocks(
                    h, pynvml.nvmlDeviceGetSupportedMemoryClocks(h)[0]
                )
            ),
            "slowdown_temp_c": lambda: pynvml.nvmlDeviceGetTemperatureThreshold(
                h, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            ),
        }
        for key, read in readers.items():
            try:
                out[key] = read()
            except Exception as exc:  # a field the driver does not expose
                out[key] = f"unavailable: {exc}"
        return out

    def _reasons(self) -> int:
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(pynvml, name, None)
            if fn is not None:
                try:
                    return int(fn(self.handle))
                except Exception:
                    continue
        return -1

    def _run(self) -> None:
        h = self.handle
        n = 0
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                sm = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
                mem = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
                watts = pynvml.nvmlDeviceGetPowerUsage(h) / 1e3
                temp = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) if n % 10 == 0 else -1
                self.rows.append((t, sm, mem, watts, self._reasons(), temp))
                if n % 5 == 0:
                    self.energy.append((t, float(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))))
            except Exception:  # an NVML read that fails once is a missing sample, not an error
                pass
            n += 1
            time.sleep(self.period_s)

    def start(self) -> None:
        if self.handle is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.handle is not None:
            self._thread.join()

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """Means over [t0, t1]: clocks, power (samples and the energy counter), reasons seen."""
        rows = [r for r in self.rows if t0 <= r[0] <= t1]
        if not rows:
            return {}
        out: dict[str, Any] = {
            "samples": len(rows),
            "sm_mhz": sum(r[1] for r in rows) / len(rows),
            "sm_mhz_min": min(r[1] for r in rows),
            "sm_mhz_max": max(r[1] for r in rows),
            "mem_mhz": sum(r[2] for r in rows) / len(rows),
            "power_w": sum(r[3] for r in rows) / len(rows),
            "reasons": sorted({r[4] for r in rows}),
            "temp_c": max(r[5] for r in rows),
        }
        energy = [e for e in self.energy if t0 <= e[0] <= t1]
        if len(energy) >= 2:
            out["energy_power_w"] = (energy[-1][1] - energy[0][1]) / 1e3 / (energy[-1][0] - energy[0][0])
        return out


def run_phase(
    name: str, step: Callable[[], None], seconds: float, sampler: Sampler, timed: list | None = None
) -> dict[str, Any]:
    """Runs ``step`` back to back for ``seconds``; keeps at most 16 steps queued on the GPU."""
    marks: list[torch.cuda.Event] = []
    t0 = time.monotonic()
    steps = 0
    while time.monotonic() - t0 < seconds:
        step()
        ev = torch.cuda.Event()
        ev.record()
        marks.append(ev)
        if len(marks) > 16:
            marks[-17].synchronize()
        steps += 1
    torch.cuda.synchronize()
    t1 = time.monotonic()
    row: dict[str, Any] = {"phase": name, "seconds": t1 - t0, "steps": steps}
    # the last 60 % of the phase: the clock has settled
    row.update(sampler.window(t0 + 0.4 * (t1 - t0), t1))
    if timed:
        half = timed[len(timed) // 2 :]
        times = sorted(a.elapsed_time(b) for a, b in half)
        row["kernel_ms_median"] = times[len(times) // 2]
        row["step_ms"] = (t1 - t0) * 1e3 / max(steps, 1)
    print(json.dumps(row), flush=True)
    return row


def gemm_step(a: torch.Tensor, b: torch.Tensor, timed: list, spin_cycles: int = 0) -> Callable[[], None]:
    def step() -> None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        timed.append((start, end))
        if spin_cycles:
            torch.cuda._sleep(spin_cycles)

    return step


def layer_step(spec: Any) -> Callable[[], None]:
    from heterosim.plan.compute.layer_profiler import ReferenceLayer, layer_shard

    shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
    layer = ReferenceLayer(torch, shard, "cuda", BF16)
    x = layer.input("cuda", BF16).requires_grad_(True)
    grad = torch.randn_like(layer.forward(x))

    def step() -> None:
        layer.forward(x).backward(grad)

    return step


def open_session(out_path: str) -> tuple[Sampler, dict[str, Any], list[dict[str, Any]], Callable[[], None]]:
    """A started sampler, the result (device, static NVML fields, phases) and its writer."""
    sampler = Sampler()
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    result["static"] = sampler.static()
    print(json.dumps(result), flush=True)
    sampler.start()
    phases: list[dict[str, Any]] = []
    result["phases"] = phases

    def save() -> None:
        json.dump(result, open(out_path, "w"), indent=1)

    return sampler, result, phases, save


def main(out_path: str) -> None:
    sampler, result, phases, save = open_session(out_path)

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=BF16)
    b = torch.randn(n, n, device="cuda", dtype=BF16)
    flops = 2.0 * n**3
    t0 = time.monotonic()
    time.sleep(3.0)
    phases.append({"phase": "idle", **sampler.window(t0 + 1.0, time.monotonic())})
    phases.append(run_phase("sleep", lambda: torch.cuda._sleep(2_000_000), 4.0, sampler))
    timed: list = []
    row = run_phase("gemm", gemm_step(a, b, timed), 8.0, sampler, timed)
    row["tflops"] = flops / row["kernel_ms_median"] / 1e9
    phases.append(row)
    save()
    gemm_cycles = row["kernel_ms_median"] * 1e-3 * row.get("sm_mhz", 1700.0) * 1e6
    for duty in DUTIES:
        timed = []
        spin = int(gemm_cycles * (1.0 - duty) / duty)
        row = run_phase(f"duty_{duty}", gemm_step(a, b, timed, spin), 6.0, sampler, timed)
        row["duty_target"] = duty
        row["duty_measured"] = row["kernel_ms_median"] / row["step_ms"]
        row["tflops"] = flops / row["kernel_ms_median"] / 1e9
        phases.append(row)
        save()
    timed = []
    za, zb = torch.zeros_like(a), torch.zeros_like(b)
    row = run_phase("gemm_zeros", gemm_step(za, zb, timed), 5.0, sampler, timed)
    row["tflops"] = flops / row["kernel_ms_median"] / 1e9
    phases.append(row)
    del za, zb
    src = torch.empty(2 << 30, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    timed = []

    def copy_step() -> None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        timed.append((start, end))

    row = run_phase("copy", copy_step, 5.0, sampler, timed)
    row["tbps_read_plus_write"] = 2 * src.numel() / row["kernel_ms_median"] / 1e9
    phases.append(row)
    src = dst = torch.empty(0, device="cuda")
    save()
    try:
        fa = a.to(torch.float8_e4m3fn)
        fb = b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        timed = []

        def fp8_step() -> None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch._scaled_mm(fa, fb, scale_a=one, scale_b=one, out_dtype=BF16)
            end.record()
            timed.append((start, end))

        row = run_phase("fp8", fp8_step, 6.0, sampler, timed)
        row["tflops"] = flops / row["kernel_ms_median"] / 1e9
        phases.append(row)
    except Exception as exc:
        phases.append({"phase": "fp8", "error": str(exc)[:200]})
    save()
    from heterosim.plan.compute import layer_profiler as lp

    for spec in (
        lp.LayerSpec(lp.ZOO["llama3-8b"], 8192, 1),
        lp.LayerSpec(lp.ZOO["gpt3-175b"], 2048, 2, tp=8, sp=True),
    ):
        try:
            step = layer_step(spec)
            step()
            torch.cuda.synchronize()
            row = run_phase(f"layer {spec.label}", step, 8.0, sampler)
            phases.append(row)
        except Exception as exc:
            phases.append({"phase": f"layer {spec.label}", "error": str(exc)[:200]})
        torch.cuda.empty_cache()
        save()
    sampler.stop()
    save()


def timed_step(work: Callable[[], None], timed: list, spin_cycles: int = 0) -> Callable[[], None]:
    def step() -> None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        timed.append((start, end))
        if spin_cycles:
            torch.cuda._sleep(spin_cycles)

    return step


def duty_sweep(
    name: str, work: Callable[[], None], duties: tuple[float, ...], seconds: float, sampler: Sampler
) -> list[dict[str, Any]]:
    """``work`` back to back, then at each duty (a spin kernel after each call fills the rest)."""
    rows = []
    cycles = 0.0
    for duty in duties:
        timed: list = []
        spin = int(cycles * (1.0 - duty) / duty) if duty < 1.0 else 0
        row = run_phase(f"{name} duty_{duty}", timed_step(work, timed, spin), seconds, sampler, timed)
        row["duty_target"] = duty
        row["duty_measured"] = row["kernel_ms_median"] / row["step_ms"]
        if duty == 1.0:
            cycles = row["kernel_ms_median"] * 1e-3 * row.get("sm_mhz", 1500.0) * 1e6
        rows.append(row)
    return rows


def main_dvfs(out_path: str) -> None:
    """The clock-power curve of more workloads: fp8 products (they reach lower clocks at the
    limit than bf16 ones) and a whole layer, each at several duties."""
    sampler, result, phases, save = open_session(out_path)

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=BF16)
    b = torch.randn(n, n, device="cuda", dtype=BF16)
    t0 = time.monotonic()
    time.sleep(2.0)
    phases.append({"phase": "idle", **sampler.window(t0 + 0.5, time.monotonic())})
    phases.append(run_phase("sleep", lambda: torch.cuda._sleep(2_000_000), 3.0, sampler))
    phases.extend(duty_sweep("gemm_bf16", lambda: a @ b, (1.0, 0.3), 6.0, sampler))
    save()
    fa = a.to(torch.float8_e4m3fn)
    fb = b.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    phases.extend(
        duty_sweep(
            "gemm_fp8",
            lambda: torch._scaled_mm(fa, fb, scale_a=one, scale_b=one, out_dtype=BF16),
            (1.0, 0.85, 0.7, 0.5, 0.3),
            6.0,
            sampler,
        )
    )
    save()
    from heterosim.plan.compute import layer_profiler as lp

    step = layer_step(lp.LayerSpec(lp.ZOO["llama3-8b"], 8192, 1))
    step()
    torch.cuda.synchronize()
    phases.extend(duty_sweep("layer llama3-8b-s8192-b1", step, (1.0, 0.8, 0.6, 0.35), 7.0, sampler))
    sampler.stop()
    save()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "dvfs":
        main_dvfs(sys.argv[1])
    else:
        main(sys.argv[1])
