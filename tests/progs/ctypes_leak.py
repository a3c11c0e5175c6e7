"""ctypes_leak.py: a python3 script that leaks through ctypes
(tests/control/test_attach_real.py). Python's ctypes calls C through
libffi, which jumps to the address ctypes looked up with dlsym: here in
libc's handle, so libc's own malloc and free, taken before "ready", so
before any attach; no PLT slot is on the way. (CDLL(None).malloc would
not do: in Debian's python3, built without PIE, it is the address of
python3's own PLT entry for malloc, the symbol's canonical address, and
the call goes through python3's slot.)

A thread, every 10 ms: 10 times, malloc(4096) through ctypes, dropped
(the leak), and malloc(2048) through ctypes into a ring of 256 blocks
whose oldest block it frees through ctypes' free (flat once the ring is
full); and one bytearray(3000) into a ring of 16 (flat: Python's own
allocator takes blocks this big from malloc, through the PLT). Every
block is filled with a byte of its own and checked before it is freed.

stdin: "count" -> "ok LEAKED STEPS" (bytes leaked so far through ctypes,
loop turns), "pause" (the thread stops at its next turn: the same answer,
exact then), "resume" -> "ok", "quit" -> "done errors=N" (blocks whose
bytes were not those written), exit 3.
"""
import ctypes
import sys
import threading
import time

libc = ctypes.CDLL("libc.so.6")
malloc = libc.malloc
malloc.restype = ctypes.c_void_p
malloc.argtypes = [ctypes.c_size_t]
free = libc.free
free.restype = None
free.argtypes = [ctypes.c_void_p]
memset = ctypes.memset

leaked = 0
steps = 0
errors = 0
paused = threading.Event()
stopped = threading.Event()
quitting = threading.Event()
lock = threading.Lock()


def work():
    global leaked, steps, errors
    ring = [None] * 256
    arrays = [None] * 16
    i = 0
    while not quitting.is_set():
        while paused.is_set() and not quitting.is_set():
            stopped.set()
            time.sleep(0.001)
        stopped.clear()
        with lock:
            for _ in range(10):
                malloc(4096)
                leaked += 4096
                j = i % 256
                old = ring[j]
                if old:
                    got = ctypes.string_at(old, 2048)
                    if got != bytes([j]) * 2048:
                        errors += 1
                    free(old)
                p = malloc(2048)
                memset(p, j, 2048)
                ring[j] = p
                i += 1
            k = steps % 16
            if arrays[k] is not None and arrays[k] != bytearray([k]) * 3000:
                errors += 1
            arrays[k] = bytearray([k]) * 3000
            steps += 1
        time.sleep(0.01)


th = threading.Thread(target=work)
th.start()
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "pause":
        paused.set()
        while not stopped.is_set():
            time.sleep(0.001)
    elif cmd == "resume":
        paused.clear()
    elif cmd == "quit":
        break
    if cmd in ("count", "pause", "resume"):
        with lock:
            print("ok", leaked, steps, flush=True)
    else:
        print("unknown command %r" % cmd, flush=True)
quitting.set()
paused.clear()
th.join()
print("done errors=%d" % errors, flush=True)
sys.exit(3)
