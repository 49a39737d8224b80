"""Another X client, for the tray scenario, through Xlib by ctypes (no extra
package):

  x11-keys.py grab ctrl+shift+space   grabs the key combination on the root
                                      window as another program would, prints
                                      GRABBED (or TAKEN when someone holds it
                                      already) and keeps it until stdin closes
  x11-keys.py close WINDOW_ID         sends WM_DELETE_WINDOW to a window, as a
                                      window manager's close button does
"""
import ctypes
import ctypes.util
import sys

x = ctypes.CDLL(ctypes.util.find_library("X11"))
x.XOpenDisplay.restype = ctypes.c_void_p
x.XOpenDisplay.argtypes = [ctypes.c_char_p]
x.XDefaultRootWindow.restype = ctypes.c_ulong
x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x.XStringToKeysym.restype = ctypes.c_ulong
x.XStringToKeysym.argtypes = [ctypes.c_char_p]
x.XKeysymToKeycode.restype = ctypes.c_ubyte
x.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
x.XGrabKey.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_int]
x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
x.XInternAtom.restype = ctypes.c_ulong
x.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
x.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
x.XFlush.argtypes = [ctypes.c_void_p]

SHIFT, LOCK, CONTROL, MOD1, MOD2, MOD4 = 1, 2, 4, 8, 16, 64
GRAB_MODE_ASYNC = 1
BAD_ACCESS = 10


class XErrorEvent(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("display", ctypes.c_void_p), ("resourceid", ctypes.c_ulong),
                ("serial", ctypes.c_ulong), ("error_code", ctypes.c_ubyte), ("request_code", ctypes.c_ubyte),
                ("minor_code", ctypes.c_ubyte)]


errors = []
HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(XErrorEvent))(
    lambda _d, e: errors.append(e.contents.error_code) or 0)
x.XSetErrorHandler(HANDLER)


def display():
    d = x.XOpenDisplay(None)
    if not d:
        sys.exit("no X display")
    return d


def grab(combo):
    d = display()
    *mods, key = combo.lower().split("+")
    mask = sum({"ctrl": CONTROL, "control": CONTROL, "shift": SHIFT, "alt": MOD1, "super": MOD4}[m] for m in mods)
    code = x.XKeysymToKeycode(d, x.XStringToKeysym(key.encode()))
    root = x.XDefaultRootWindow(d)
    # The same lock-key variants global-hotkey grabs (NumLock, CapsLock).
    for extra in (0, MOD2, LOCK, MOD2 | LOCK):
        x.XGrabKey(d, code, mask | extra, root, 0, GRAB_MODE_ASYNC, GRAB_MODE_ASYNC)
    x.XSync(d, 0)
    print("TAKEN" if BAD_ACCESS in errors else "GRABBED", flush=True)
    sys.stdin.read()  # held until the test closes our stdin


class ClientMessage(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("data", ctypes.c_long * 5), ("pad", ctypes.c_long * 12)]


def close(window):
    d = display()
    event = ClientMessage()
    event.type = 33  # ClientMessage
    event.window = window
    event.message_type = x.XInternAtom(d, b"WM_PROTOCOLS", 0)
    event.format = 32
    event.data[0] = x.XInternAtom(d, b"WM_DELETE_WINDOW", 0)
    event.data[1] = 0  # CurrentTime
    x.XSendEvent(d, window, 0, 0, ctypes.byref(event))
    x.XSync(d, 0)
    print("CLOSED" if not errors else f"ERROR {errors}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("grab", "close"):
        sys.exit(__doc__)
    if sys.argv[1] == "grab":
        grab(sys.argv[2])
    else:
        close(int(sys.argv[2], 0))
