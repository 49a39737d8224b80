"""A stand-in for a desktop panel in headless tests: owns the
StatusNotifierWatcher name on the session bus, records the tray items that
register, and on request reads an item's menu or clicks one of its entries,
as a panel does when the person uses the tray.

Line protocol: it prints `READY`, then `REGISTERED <service> <path>` for each
item. On stdin: `menu` prints `MENU <json [[id, label, enabled, toggle-state], ...]>` (the
whole tree, flattened); `click <label>` sends the entry a "clicked" event and
prints `CLICKED <label>` (or `NOLABEL <label>`); `quit` ends it.
"""
import json
import sys
import threading
import time

from gi.repository import Gio, GLib

XML = """<node><interface name="org.kde.StatusNotifierWatcher">
<method name="RegisterStatusNotifierItem"><arg type="s" direction="in"/></method>
<method name="RegisterStatusNotifierHost"><arg type="s" direction="in"/></method>
<property name="RegisteredStatusNotifierItems" type="as" access="read"/>
<property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
<property name="ProtocolVersion" type="i" access="read"/>
<signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
</interface></node>"""

items = []
bus = Gio.bus_get_sync(Gio.BusType.SESSION)
loop = GLib.MainLoop()


def say(line):
    print(line, flush=True)


def on_call(conn, sender, path, iface, method, params, inv):
    if method == "RegisterStatusNotifierItem":
        arg = params.unpack()[0]
        svc, obj = (sender, arg) if arg.startswith("/") else (arg, "/StatusNotifierItem")
        items.append((svc, obj))
        say(f"REGISTERED {svc} {obj}")
    inv.return_value(None)


def on_get(conn, sender, path, iface, prop):
    return {
        "RegisteredStatusNotifierItems": GLib.Variant("as", [f"{s}{o}" for s, o in items]),
        "IsStatusNotifierHostRegistered": GLib.Variant("b", True),
        "ProtocolVersion": GLib.Variant("i", 0),
    }[prop]


def call(svc, obj, iface, method, args, rtype):
    vtype = GLib.VariantType(rtype) if rtype else None
    return bus.call_sync(svc, obj, iface, method, args, vtype, 0, 5000, None)


def menu_path(svc, obj):
    props = call(svc, obj, "org.freedesktop.DBus.Properties", "GetAll",
                 GLib.Variant("(s)", ("org.kde.StatusNotifierItem",)), "(a{sv})").unpack()[0]
    return props["Menu"]


def flatten(node, out):
    ident, props, children = node
    if "label" in props:
        out.append([ident, props["label"].replace("_", ""), props.get("enabled", True), props.get("toggle-state", -1)])
    for child in children:
        flatten(child, out)
    return out


def entries():
    svc, obj = items[-1]
    path = menu_path(svc, obj)
    layout = call(svc, path, "com.canonical.dbusmenu", "GetLayout",
                  GLib.Variant("(iias)", (0, -1, [])), "(u(ia{sv}av))").unpack()
    return svc, path, flatten(layout[1], [])


def command(line):
    line = line.strip()
    if not items and line != "quit":
        say("NOITEM")
        return False
    if line == "menu":
        _, _, found = entries()
        say("MENU " + json.dumps(found))
    elif line.startswith("click "):
        label = line[len("click "):]
        svc, path, found = entries()
        match = [e for e in found if e[1] == label]
        if not match:
            say(f"NOLABEL {label}")
        else:
            call(svc, path, "com.canonical.dbusmenu", "Event",
                 GLib.Variant("(isvu)", (match[0][0], "clicked", GLib.Variant("s", ""), int(time.time()))), None)
            say(f"CLICKED {label}")
    elif line == "quit":
        loop.quit()
    return False


def read_stdin():
    for line in sys.stdin:
        GLib.idle_add(command, line)
    GLib.idle_add(loop.quit)


node = Gio.DBusNodeInfo.new_for_xml(XML)
bus.register_object("/StatusNotifierWatcher", node.interfaces[0], on_call, on_get, None)
Gio.bus_own_name_on_connection(bus, "org.kde.StatusNotifierWatcher", Gio.BusNameOwnerFlags.NONE,
                               lambda *_: say("READY"), None)
threading.Thread(target=read_stdin, daemon=True).start()
loop.run()
