"""The confined process of `rlrun:python` (see `rlrun.agents.sandbox`, which starts it as
``python -I -S -X utf8 sandbox_child.py`` with a JSON request on stdin). Standard library only:
it confines itself first, then runs the code it was given.

In order: new namespaces (network, mount, pid, IPC; a user namespace too when not root), a
private root (a size-limited tmpfs holding read-only binds of the system and Python folders and
a writable /work, entered with chroot), a fork so the code runs as pid 1 of its pid namespace
(everything it starts dies with it), an unprivileged user (nobody when started as root), no
capabilities, resource limits (CPU time, address space, file size, processes, open files),
no-new-privileges, and a Landlock domain (files: read the allowed folders, write /work; TCP
bind/connect denied; signals and abstract sockets scoped). Each step that this kernel or user
does not allow is left out and reported; the request says which protections are required, and
without one of them the code is not run (exit status REFUSED).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import traceback

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
ST_RELATIME = 4096  # statvfs's bit for relatime (MS_RELATIME differs)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
NOBODY = 65534
REFUSED = 71  # exit status: a required protection is not available here
WORK = "/work"

# Landlock (include/uapi/linux/landlock.h): syscalls 444-446 on every architecture.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ALL_ABI1 = (1 << 13) - 1  # execute .. make_sym
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def main() -> None:
    request = json.loads(sys.stdin.read())
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    report: dict[str, object] = {}
    root = os.getuid() == 0
    uid, gid = (NOBODY, NOBODY) if root else (os.getuid(), os.getgid())
    running = _count_processes(uid)  # before a pid namespace hides them: RLIMIT_NPROC counts them all
    spaces = _enter_namespaces(libc, root)
    if "user" in spaces:  # RLIMIT_NPROC counts per user namespace (Linux 5.14+): this one holds only us
        running = 1
    report["namespaces"] = sorted(spaces)
    work = request["root_dir"]
    if "mount" in spaces:
        _build_root(libc, request, uid, gid)
        work = WORK
        report["filesystem"] = "private root"
    else:
        os.chown(work, uid, gid)  # the code's folder on this machine's disk, its user's
    if "pid" in spaces:
        _become_init(libc)
    _drop_user(libc, root, uid, gid, report)
    _set_limits(request, running)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _landlock(libc, work, private_root="mount" in spaces, report=report)
    report["network"] = "namespace" if "net" in spaces else report.get("network")
    bounded = os.getuid() != 0  # RLIMIT_NPROC binds every user but root
    report["processes"] = (
        ("RLIMIT_NPROC" + (", pid namespace" if "pid" in spaces else "")) if bounded else None
    )
    missing = [need for need in request["require"] if not report.get(need)]
    if request.get("probe"):
        print(json.dumps(report))
        return
    if missing:
        print(
            f"not confined here: no {' and no '.join(missing)} isolation ({json.dumps(report)})",
            file=sys.stderr,
        )
        sys.exit(REFUSED)
    os.chdir(work)
    os.environ.clear()
    os.environ.update(
        {"HOME": work, "TMPDIR": work, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    )
    _run(request["code"])


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:  # ended meanwhile
                pass
    return count


def _enter_namespaces(libc: ctypes.CDLL, root: bool) -> set[str]:
    """Network, mount, pid and IPC namespaces (inside a new user namespace when not root), or none."""
    spaces = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC
    uid, gid = os.getuid(), os.getgid()
    if root and libc.unshare(spaces) == 0:
        return {"net", "mount", "pid", "ipc"}
    if libc.unshare(CLONE_NEWUSER | spaces) != 0:
        return set()
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)
    return {"user", "net", "mount", "pid", "ipc"}


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str = ""
) -> None:
    if libc.mount(_bytes(source), target.encode(), _bytes(fstype), flags, _bytes(data or None)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _build_root(libc: ctypes.CDLL, request: dict, uid: int, gid: int) -> None:
    """A tmpfs (the code's whole disk) with the system and Python folders bound read-only, the
    four harmless devices, and /work; entered with chroot. Nothing else of this machine (homes,
    /tmp, /proc, the project) exists inside."""
    new = request["root_dir"]
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, f"size={request['disk_mb']}m,mode=755")
    for path in _readable_paths():
        _bind(libc, path, new + path, read_only=True)
    for device in DEVICES:
        if os.path.exists(device):
            _bind(libc, device, new + device, read_only=False)
    os.makedirs(new + WORK, mode=0o700)
    os.chown(new + WORK, uid, gid)
    os.chroot(new)
    os.chdir("/")


def _readable_paths() -> list[str]:
    """The system folders and this interpreter's own (its prefix, where pyenv or a venv put it)."""
    python = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix)}
    python |= {
        os.path.dirname(os.path.abspath(sys.executable)),
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    paths = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    return paths + sorted(p for p in python if not any(p == s or p.startswith(s + "/") for s in paths))


def _bind(libc: ctypes.CDLL, source: str, target: str, *, read_only: bool) -> None:
    if os.path.islink(source) and os.path.dirname(source) == "/":  # /bin -> usr/bin: the link itself
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(source), target)
        return
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        open(target, "a").close()
    _mount(libc, source, target, None, MS_BIND | MS_REC)
    # A bind's own flags are changed by a remount, keeping those a user namespace may not drop.
    kept = os.statvfs(source).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    kept |= MS_RELATIME if os.statvfs(source).f_flag & ST_RELATIME else 0
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | kept | (MS_RDONLY if read_only else MS_NOEXEC)
    _mount(libc, None, target, None, flags)


def _become_init(libc: ctypes.CDLL) -> None:
    """Fork: the child is pid 1 of the new pid namespace, killed when this process dies (and
    with it everything the code started); this process waits and passes on its exit status."""
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)  # killed by signal n: 128 + n, as a shell says
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def _drop_user(libc: ctypes.CDLL, root: bool, uid: int, gid: int, report: dict) -> None:
    """Root becomes nobody (RLIMIT_NPROC binds no root process); then no capabilities at all."""
    if root:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        except OSError:  # no CAP_SETUID here: the code would run as root, its processes unbounded
            pass
    report["user"] = "nobody" if root and os.getuid() == uid else "root" if root else "unchanged"

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    no_capabilities = (ctypes.c_uint32 * 6)()
    libc.capset(ctypes.byref(Header(0x20080522, 0)), no_capabilities)  # _LINUX_CAPABILITY_VERSION_3


def _set_limits(request: dict, running: int) -> None:
    megabyte = 1 << 20
    cpu = request["cpu_time_s"]
    for limit, value in (
        (resource.RLIMIT_CPU, (cpu, cpu)),
        (resource.RLIMIT_AS, (request["memory_mb"] * megabyte,) * 2),
        (resource.RLIMIT_FSIZE, (request["disk_mb"] * megabyte,) * 2),
        (resource.RLIMIT_NPROC, (running + request["max_processes"],) * 2),
        (resource.RLIMIT_NOFILE, (64, 64)),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(limit, value)


def _landlock(libc: ctypes.CDLL, work: str, *, private_root: bool, report: dict) -> None:
    """Files: read (and run) the allowed folders, anything in `work`; TCP bind and connect
    denied (ABI 4); signals and abstract unix sockets kept inside (ABI 6)."""
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return
    fs_all = FS_ALL_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0)
    fs_all |= FS_IOCTL_DEV if abi >= 5 else 0
    attr = (ctypes.c_uint64 * 3)(fs_all, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, 0)
    attr[2] = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return
    read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
    file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    rules = [("/", read)] if private_root else [(p, read) for p in _readable_paths()]
    rules += [(work, fs_all)] + [(d, FS_READ_FILE | FS_WRITE_FILE) for d in DEVICES]
    for path, access in rules:
        if not os.path.exists(path):
            continue
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        allowed = access if os.path.isdir(path) else access & file_rights
        libc.syscall(SYS_ADD_RULE, ruleset, 1, ctypes.byref(PathBeneath(allowed, fd)), 0)
        os.close(fd)
    if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) == 0:
        report["filesystem"] = report.get("filesystem") or f"landlock (ABI {abi})"
        report["network"] = "landlock TCP" if abi >= 4 else None
        report["landlock"] = abi
    os.close(ruleset)


def _run(code: str) -> None:
    """Run the code as a script's __main__; an exception ends it with its last line on stderr."""
    try:
        exec(compile(code, "<code>", "exec"), {"__name__": "__main__"})  # noqa: S102 (the sandbox exists to run it)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 (the code's own error is its result)
        sys.stdout.flush()
        print("".join(traceback.format_exception_only(type(exc), exc)).strip(), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
