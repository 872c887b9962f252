# Each GPU produces a tensor and registers it; gather_blocking brings every one but device 0's to the host.
import gpuxfer
import torch

manager = gpuxfer.Manager()  # every visible GPU; gpuxfer.NoDeviceError if none
transfer = gpuxfer.Transfer(manager)
for i, device in enumerate(manager.devices):
    result = torch.full((4 << 20,), i + 1, dtype=torch.uint8, device=f"cuda:{device.ordinal}")  # "compute"
    transfer.set_device_buffer(i, result)  # kept alive while registered; later copies wait for that work

gathered = transfer.gather_blocking(0)  # numpy arrays over pinned memory, device 0 skipped
for device, array in enumerate(gathered, start=1):
    print(f"device {device}: {array.size} bytes {'ok' if (array == device + 1).all() else 'WRONG'}")
print(f"gathered {len(gathered)} buffers to the host")
