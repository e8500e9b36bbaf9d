"""Device clock-skew correction from three timestamps (CONCEPTS §3, "Whose clock").

An event from a device carries its event time and send time, both read from the device's
clock, and the server stamps its receive time. ``receive − send`` is the device's clock offset
plus the network delay; the delay is never negative, so the *smallest* ``receive − send`` seen
recently is the best estimate of the offset (it is off by the shortest delay only, the same
reasoning as NTP's and TCP's minimum-RTT filters). A median would be biased by the *typical*
delay and move with congestion; a minimum is only fooled by a device whose clock jumps, which
is why it is a *windowed* minimum over the device's last `window` samples: after a jump the old
samples age out. ``correct`` returns ``event_time + offset``: the event time on the server's
clock (give that to ``WindowOperator.process``).

Thread-safety: none; one corrector per job thread.
"""

from __future__ import annotations

from collections import deque

from streams.errors import InvalidConfig


class _DeviceOffsets:
    """Windowed minimum of the last `window` samples in O(1) amortised (a monotonic deque)."""

    __slots__ = ("seq", "mins", "window")

    def __init__(self, window: int):
        self.seq = 0
        self.mins: deque[tuple[int, int]] = deque()  # (sample number, offset), offsets rising
        self.window = window

    def add(self, offset: int) -> int:
        mins = self.mins
        while mins and mins[-1][1] >= offset:
            mins.pop()
        mins.append((self.seq, offset))
        if mins[0][0] <= self.seq - self.window:
            mins.popleft()
        self.seq += 1
        return mins[0][1]


class ClockSkewCorrector:
    """Per-device offset estimate (windowed minimum of ``receive − send``) and corrected times.

    `window`: how many recent samples per device the minimum is taken over.
    `max_devices`: a bound on the devices remembered (the oldest-added is forgotten first).
    """

    def __init__(self, window: int = 100, max_devices: int = 100_000):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidConfig("window", window, "must be a positive number of samples")
        if isinstance(max_devices, bool) or not isinstance(max_devices, int) or max_devices < 1:
            raise InvalidConfig("max_devices", max_devices, "must be a positive number")
        self.window = window
        self.max_devices = max_devices
        self._devices: dict[object, _DeviceOffsets] = {}

    def observe(self, device_id: object, send_time: int, receive_time: int) -> int:
        """Record one sample; returns the device's current offset estimate (ms)."""
        dev = self._devices.get(device_id)
        if dev is None:
            if len(self._devices) >= self.max_devices:
                del self._devices[next(iter(self._devices))]
            dev = self._devices[device_id] = _DeviceOffsets(self.window)
        return dev.add(receive_time - send_time)

    def correct(self, device_id: object, event_time: int, send_time: int, receive_time: int) -> int:
        """The event time on the server's clock: ``event_time + offset(device)``, after adding
        this event's own sample to the estimate."""
        return event_time + self.observe(device_id, send_time, receive_time)

    def offset(self, device_id: object) -> int | None:
        """The current estimate for a device (ms to add to its clock), None if never seen."""
        dev = self._devices.get(device_id)
        return dev.mins[0][1] if dev is not None and dev.mins else None
