# Each device produces a result (a torch tensor) and registers it;
# gather_blocking reads every result except the destination's back into pinned host memory.
import sys

import gpuxfer
import torch

manager = gpuxfer.Manager()  # every visible GPU; gpuxfer.NoDeviceError if none
transfer = gpuxfer.Transfer(manager)

nbytes = 4 << 20
for i, device in enumerate(manager.devices):
    result = torch.full((nbytes,), i + 1, dtype=torch.uint8, device=f"cuda:{device.ordinal}")  # "compute"
    transfer.set_device_buffer(i, result)  # kept alive while registered; later copies wait for that work

# One numpy array over a pinned HostBuffer per source device, ascending, the destination (0) skipped.
gathered = transfer.gather_blocking(0)
for device, array in enumerate(gathered, start=1):
    ok = array.size == nbytes and bool((array == device + 1).all())
    print(f"device {device}: {array.size} bytes {'ok' if ok else 'WRONG'}")
    if not ok:
        sys.exit(1)
print(f"gathered {len(gathered)} buffers to the host")
