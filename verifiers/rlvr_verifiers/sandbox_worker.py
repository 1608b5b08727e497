"""The pre-forked sandbox worker: a small stdlib-only process that forks one jailed child per job.

Run by `rlvr_verifiers.sandbox` as `<real python> -I sandbox_worker.py` with an EMPTY environment; it never
imports rlvr_verifiers (nothing but the standard library and ctypes), so its memory holds no secret of the
process that started it, and forking from it is cheap (a few MB).  The trusted parent talks to it over
its stdin/stdout with length-prefixed frames (see `_read_frame` / `_write_frame`).

At start the worker makes itself non-dumpable and a child subreaper, compiles its seccomp filter once,
and PROBES every layer by forking a child that applies them all; the layers that held are enforced on
every job (a job whose child cannot apply one of them aborts with exit code 125: fail closed).

Per job (see `_run_job`): a fresh job dir owned by the job uid; fork; in the child (see `_jail`):
setsid, stdio on pipes plus the harness result pipe on fd 3, every other fd closed, rlimits, chdir,
a dedicated non-root uid, no_new_privs, Landlock, seccomp; then the harness runs the program.  The
worker feeds stdin, reads stdout/stderr/results with byte caps, enforces the wall clock and the job dir
quota, kills the child's session, sweeps every leftover process (daemons reparented to this subreaper,
and with a dedicated uid every process of that uid) and removes the job dir.

Harness modes (the child side of the protocol that rlvr_verifiers.code decodes):
- "script": run the source as `__main__` with the job's stdin, like `python -c SOURCE`; the result is
  the exit status and stdout.
- "call":   exec the source as module `solution`, then call `fn_name` (a top-level function, or a method
  of `class Solution`) once per argument list; for each, write ONE line on fd 3:
  `{"nonce": N, "test": i, "value": <JSON>}` or `{"nonce": N, "test": i, "error": "<ExceptionType>"}`.
  Expected values are never sent here; the parent compares.
- "probe":  apply the layers and report which held (used once at start).

Coverage and non-coverage: see the module docstring of rlvr_verifiers.sandbox.
"""

import ctypes
import errno
import json
import os
import platform
import resource
import select
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time

# Modules user code commonly imports, loaded once here so a job does not re-read them (and so a job
# whose reads are confined by Landlock still finds them).  Kept modest: fork cost grows with RSS.
PRELOAD = (
    "array",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "io",
    "itertools",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "threading",
    "traceback",
    "types",
    "typing",
    "atexit",
    "builtins",
    "queue",
    "cmath",
    "numbers",
)
for _name in PRELOAD:
    try:
        __import__(_name)
    except ImportError:  # pragma: no cover - a slim interpreter may miss one
        pass

SETUP_FAILED = 125  # exit code of a child that could not apply an enforced layer

# ---------------------------------------------------------------------------------------------------
# Syscalls and constants (x86_64 and aarch64; numbers checked against the kernel headers in the tests)

_MACHINE = platform.machine()
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(_MACHINE)
_NR_X86_64 = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "mount_setattr": 442,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "syslog": 103,
    "acct": 163,
    "quotactl": 179,
    "quotactl_fd": 443,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "kcmp": 312,
    "lookup_dcookie": 212,
    "fanotify_init": 300,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
    "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
    "kill": 62,
    "tkill": 200,
    "tgkill": 234,
    "socket": 41,
    "socketpair": 53,
    "connect": 42,
    "clone": 56,
    "clone3": 435,
    "modify_ldt": 154,
    "iopl": 172,
    "ioperm": 173,
    "vhangup": 153,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "sethostname": 170,
    "setdomainname": 171,
    "capset": 126,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "shmdt": 67,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
}
_NR_AARCH64 = {
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "unshare": 97,
    "setns": 268,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "mount_setattr": 442,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "keyctl": 219,
    "add_key": 217,
    "request_key": 218,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "reboot": 142,
    "swapon": 224,
    "swapoff": 225,
    "syslog": 116,
    "acct": 89,
    "quotactl": 60,
    "quotactl_fd": 443,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "kcmp": 272,
    "lookup_dcookie": 18,
    "fanotify_init": 262,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
    "rt_sigqueueinfo": 138,
    "rt_tgsigqueueinfo": 240,
    "kill": 129,
    "tkill": 130,
    "tgkill": 131,
    "socket": 198,
    "socketpair": 199,
    "connect": 203,
    "clone": 220,
    "clone3": 435,
    "vhangup": 58,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "adjtimex": 171,
    "sethostname": 161,
    "setdomainname": 162,
    "capset": 91,
    "shmget": 194,
    "shmat": 196,
    "shmctl": 195,
    "shmdt": 197,
    "semget": 190,
    "semop": 193,
    "semctl": 191,
    "semtimedop": 192,
    "msgget": 186,
    "msgsnd": 189,
    "msgrcv": 188,
    "msgctl": 187,
    "mq_open": 180,
    "mq_unlink": 181,
    "mq_timedsend": 182,
    "mq_timedreceive": 183,
    "mq_notify": 184,
    "mq_getsetattr": 185,
}
NR = {"x86_64": _NR_X86_64, "aarch64": _NR_AARCH64}.get(_MACHINE, {})
NR_LANDLOCK_CREATE_RULESET, NR_LANDLOCK_ADD_RULE, NR_LANDLOCK_RESTRICT_SELF = 444, 445, 446

PR_SET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_KEEPCAPS = 1, 3, 4, 8
PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 22, 36, 38
SECCOMP_MODE_FILTER = 2
CAP_DAC_READ_SEARCH = 2
AF_UNIX, SOCK_STREAM, SOCK_SEQPACKET = 1, 1, 5
# clone() flags that create namespaces (CLONE_NEWTIME shares its bit with the exit signal in clone()).
CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def _syscall(nr, *args):
    result = _libc.syscall(ctypes.c_long(nr), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    args = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in (arg2, arg3, arg4, arg5)]
    result = _libc.prctl(ctypes.c_int(option), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


# ---------------------------------------------------------------------------------------------------
# Landlock (direct syscalls; rights per ABI version, see Documentation/userspace-api/landlock.rst)

LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
LL_SCOPE_ABSTRACT_UNIX_SOCKET, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
LANDLOCK_RULE_PATH_BENEATH = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi():
    try:
        return _syscall(NR_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


def _landlock_fs_rights(abi):
    rights = LL_FS_ABI1
    if abi >= 2:
        rights |= LL_REFER
    if abi >= 3:
        rights |= LL_TRUNCATE
    if abi >= 5:
        rights |= LL_IOCTL_DEV
    return rights


def _landlock_open_rules(read_paths, rw_paths, job_dir):
    """O_PATH fds and rights of every rule, opened before the uid switch (the job uid may not be able to
    traverse to them): reads beneath read_paths, read+write of rw_paths (e.g. /dev/null), all beneath
    job_dir."""
    read_rights = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    rules = []
    wanted = [(p, read_rights) for p in read_paths] + [(p, LL_READ_FILE | LL_WRITE_FILE) for p in rw_paths]
    for path, rights in wanted:
        try:
            rules.append((os.open(path, os.O_PATH | os.O_CLOEXEC), rights))
        except OSError:
            continue  # a listed path that does not exist grants nothing
    rules.append((os.open(job_dir, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY), -1))  # -1: every right
    return rules


def _landlock_restrict(abi, rules, net, scope):
    """Restrict this process to `rules` (closing their fds); TCP denied (net) and signals/abstract
    sockets scoped (scope) where the ABI has them."""
    fs = _landlock_fs_rights(abi)
    attr = _RulesetAttr(fs, 0, 0)
    size = 8
    if net and abi >= 4:
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP  # no port rule: all TCP denied
        size = 16
    if scope and abi >= 6:
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL
        size = 24
    try:
        ruleset = _syscall(
            NR_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        )
        try:
            for fd, rights in rules:
                rights = fs if rights == -1 else rights
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= LL_FILE_RIGHTS
                rule = _PathBeneathAttr(rights & fs, fd)
                _syscall(
                    NR_LANDLOCK_ADD_RULE,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
            _syscall(NR_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in rules:
            os.close(fd)


# ---------------------------------------------------------------------------------------------------
# seccomp: a classic-BPF filter built once per worker

_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JSET_K, _BPF_RET_K, _BPF_ALU_AND_K = 0x20, 0x15, 0x45, 0x06, 0x54
_RET_KILL_PROCESS, _RET_ALLOW = 0x80000000, 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_lo(i):
    return 16 + 8 * i  # low 32 bits of args[i] (little-endian: x86_64 and aarch64)


DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "kcmp",
    "lookup_dcookie",
    "fanotify_init",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "connect",
    "modify_ldt",
    "iopl",
    "ioperm",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    # SysV IPC and POSIX message queues: kernel objects that outlive the job (no IPC namespace here)
    *("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop"),
    *("msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive"),
    *("mq_notify", "mq_getsetattr"),
)


def build_seccomp_filter(parent_pid):
    """The filter as packed sock_filter structs.

    Denied with EPERM: namespaces and mounts (unshare, setns, clone with CLONE_NEW* flags), ptrace and
    process_vm_*, io_uring (it bypasses seccomp for the operations it queues), bpf/perf/userfaultfd,
    kernel keyring, modules, open_by_handle_at, pidfd signalling, connect() of any socket, kill() of a
    negative pid (a process group, or -1: everything) or of the worker; socket()/socketpair() only
    for AF_UNIX stream/seqpacket (no TCP, UDP, raw, netlink; no datagram sockets that could address a
    path); clone3 answers ENOSYS so libc falls back to clone, whose flags are inspectable.
    Any other architecture (x32 on x86_64 included) kills the process.
    """
    if AUDIT_ARCH is None or not NR:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {_MACHINE}")
    prog = []

    def ins(code, k, jt=0, jf=0):
        prog.append((code, jt, jf, k))

    def deny(err=errno.EPERM):
        ins(_BPF_RET_K, _RET_ERRNO | err)

    ins(_BPF_LD_W_ABS, _OFF_ARCH)
    ins(_BPF_JEQ_K, AUDIT_ARCH, 1, 0)
    ins(_BPF_RET_K, _RET_KILL_PROCESS)
    ins(_BPF_LD_W_ABS, _OFF_NR)
    if _MACHINE == "x86_64":  # the x32 ABI: syscall numbers with bit 30 set
        ins(0x35, 0x40000000, 0, 1)  # jge
        deny()
    for name in DENIED_SYSCALLS:
        if name in NR:
            ins(_BPF_JEQ_K, NR[name], 0, 1)
            deny()
    ins(_BPF_JEQ_K, NR["clone3"], 0, 1)
    deny(errno.ENOSYS)
    # clone(flags, ...): no namespace flags
    ins(_BPF_JEQ_K, NR["clone"], 0, 4)
    ins(_BPF_LD_W_ABS, _arg_lo(0))
    ins(_BPF_JSET_K, CLONE_NS_FLAGS, 0, 1)
    deny()
    ins(_BPF_RET_K, _RET_ALLOW)
    # socket(domain, type, ...) and socketpair(domain, type, ...): AF_UNIX stream/seqpacket only
    for name in ("socket", "socketpair"):
        ins(_BPF_JEQ_K, NR[name], 0, 9)
        ins(_BPF_LD_W_ABS, _arg_lo(0))
        ins(_BPF_JEQ_K, AF_UNIX, 1, 0)
        deny(errno.EAFNOSUPPORT)
        ins(_BPF_LD_W_ABS, _arg_lo(1))
        ins(_BPF_ALU_AND_K, 0xF)
        ins(_BPF_JEQ_K, SOCK_STREAM, 2, 0)
        ins(_BPF_JEQ_K, SOCK_SEQPACKET, 1, 0)
        deny(errno.EPROTONOSUPPORT)
        ins(_BPF_RET_K, _RET_ALLOW)
    # kill(pid, sig): pid must be >= 0 and not the worker; tkill/tgkill: not the worker
    ins(_BPF_JEQ_K, NR["kill"], 0, 6)
    ins(_BPF_LD_W_ABS, _arg_lo(0))
    ins(_BPF_JSET_K, 0x80000000, 2, 0)
    ins(_BPF_JEQ_K, parent_pid, 1, 0)
    ins(_BPF_RET_K, _RET_ALLOW)
    deny()
    for name in ("tkill", "tgkill"):
        ins(_BPF_JEQ_K, NR[name], 0, 4)
        ins(_BPF_LD_W_ABS, _arg_lo(0))
        ins(_BPF_JEQ_K, parent_pid, 0, 1)
        deny()
        ins(_BPF_RET_K, _RET_ALLOW)
    ins(_BPF_RET_K, _RET_ALLOW)
    return b"".join(struct.pack("=HBBI", *i) for i in prog), len(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_SECCOMP = {}  # "buf", "prog": kept alive for the worker's lifetime


def _seccomp_apply():
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(_SECCOMP["prog"]))


# ---------------------------------------------------------------------------------------------------
# capabilities (only to keep CAP_DAC_READ_SEARCH when the interpreter is not world-readable)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capset_only(cap_bits):
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = cap_bits
    _syscall(NR["capset"], ctypes.byref(header), ctypes.byref(data))


# ---------------------------------------------------------------------------------------------------
# framing with the parent

CONTROL_IN = CONTROL_OUT = -1


def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_frame():
    (size,) = struct.unpack(">I", _read_exact(CONTROL_IN, 4))
    header = json.loads(_read_exact(CONTROL_IN, size))
    blobs = [_read_exact(CONTROL_IN, n) for n in header.get("blobs", [])]
    return header, blobs


def _write_frame(header, blobs=()):
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header).encode()
    _write_all(CONTROL_OUT, struct.pack(">I", len(raw)) + raw)
    for blob in blobs:
        _write_all(CONTROL_OUT, blob)


# ---------------------------------------------------------------------------------------------------
# worker state

CONFIG = {}
ENFORCE = set()  # layers that held at the probe; every job applies exactly these or aborts
LAYERS = {}  # layer -> {"active": bool, "detail": str}
STATE = {
    "base_dir": "",
    "uid": None,
    "gid": None,
    "keep_dac_read_search": False,
    "read_paths": [],
    "landlock_abi": 0,
}


def _world_readable_tree(path):
    """Every ancestor directory world-searchable and the path itself world-readable."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        try:
            mode = os.stat(os.sep.join(parts[:i]) or os.sep).st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def _read_paths():
    paths = set()
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), *sys.path]:
        if p and os.path.exists(p):
            paths.add(os.path.realpath(p))
    for p in (
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/usr/local/lib",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/usr/share/zoneinfo",
        "/dev/urandom",
        "/dev/random",
        "/dev/zero",
        "/proc/self",
        *CONFIG.get("extra_read_paths", []),
    ):
        if os.path.exists(p):
            paths.add(p if p == "/proc/self" else os.path.realpath(p))
    return sorted(paths)


def _setup_worker(config):
    CONFIG.update(config)
    layers = {}

    def put(name, active, detail):
        layers[name] = {"active": bool(active), "detail": detail}

    put(
        "empty_env",
        not [k for k in os.environ if k != "LC_CTYPE"],
        "started with an empty environment (only Python's own LC_CTYPE coercion)",
    )
    try:
        _prctl(PR_SET_DUMPABLE, 0)
        put("non_dumpable", _prctl(PR_GET_DUMPABLE) == 0, "worker and jobs are non-dumpable")
    except OSError as e:
        put("non_dumpable", False, f"prctl(PR_SET_DUMPABLE) failed: {e}")
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        put("subreaper", True, "orphaned job processes are reparented to the worker and swept")
    except OSError as e:
        put("subreaper", False, f"prctl(PR_SET_CHILD_SUBREAPER) failed: {e}")

    base = tempfile.mkdtemp(prefix="rlvr-sandbox-", dir=config["work_dir"])
    os.chmod(base, 0o711)
    STATE["base_dir"] = base
    STATE["worker_pid"] = os.getpid()
    STATE["read_paths"] = _read_paths()
    STATE["landlock_abi"] = landlock_abi()
    uid = None
    if os.geteuid() == 0 and config.get("job_uid_base") is not None:
        try:
            uid = _claim_uid(config["job_uid_base"], config["job_uid_count"], config["uid_lock_dir"])
        except OSError as e:
            STATE["uid_reason"] = f"no dedicated uid: {e}"
    if uid is not None:
        STATE["uid"], STATE["gid"] = uid, uid
        _kill_uid(uid)  # leftovers of a previous worker with this uid (one killed with SIGKILL, say)
        stdlib = os.path.dirname(os.__file__)
        STATE["keep_dac_read_search"] = not _world_readable_tree(stdlib)
        if STATE["keep_dac_read_search"] and not STATE["landlock_abi"]:
            # The job uid could not import the stdlib, and nothing would confine a kept capability.
            STATE["uid"] = None
            STATE["uid_reason"] = (
                f"the interpreter ({stdlib}) is not readable by uid {uid} and there is no "
                "Landlock to confine CAP_DAC_READ_SEARCH; install Python world-readable "
                "or set SandboxConfig.python"
            )
    try:
        buf, n = build_seccomp_filter(os.getpid())
        _SECCOMP["buf"] = ctypes.create_string_buffer(buf, len(buf))
        _SECCOMP["prog"] = _SockFprog(n, ctypes.addressof(_SECCOMP["buf"]))
    except OSError as e:
        _SECCOMP["error"] = str(e)

    probe = _probe()
    abi = STATE["landlock_abi"]
    for name in ("session", "rlimits", "uid", "landlock_fs", "landlock_net", "landlock_scope", "seccomp"):
        ok, detail = probe.get(name, (False, "not probed"))
        put(name, ok, detail)
    if not abi:
        for name in ("landlock_fs", "landlock_net", "landlock_scope"):
            put(name, False, "kernel has no Landlock (needs Linux >= 5.13 with lsm=landlock)")
    put("wall_clock", True, "job session killed at its deadline (SIGKILL to the process group)")
    put(
        "output_cap",
        True,
        f"stdout capped at {config['stdout_limit']} B, stderr at {config['stderr_limit']} B; "
        "a flood is truncated and the job killed",
    )
    put(
        "disk_quota",
        True,
        f"job dir capped at {config['disk_limit']} B / {config['max_files']} entries "
        f"(polled), files at {config['file_size_limit']} B (RLIMIT_FSIZE)",
    )
    sweep = "every process left after a job is killed"
    sweep += (
        " (kill(-1) as the dedicated uid, plus the subreaper's children)"
        if "uid" in ENFORCE
        else " (the job's process group and the subreaper's children; a process that escaped both is missed)"
    )
    put("sweep", layers["subreaper"]["active"], sweep)
    LAYERS.update(layers)


def _claim_uid(base, count, lock_dir):
    """The first uid in [base, base + count) that no other worker on this host holds: an exclusive
    flock on `lock_dir/<uid>`, held for this worker's lifetime (released by the kernel when it dies).
    Uids named in /etc/passwd are skipped (the sweep kills every process of the claimed uid)."""
    import fcntl

    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    st = os.lstat(lock_dir)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise OSError(errno.EPERM, f"{lock_dir} must be a root-owned directory writable only by root")
    known = set()
    try:
        with open("/etc/passwd") as f:
            known = {int(line.split(":")[2]) for line in f if line.count(":") >= 3}
    except (OSError, ValueError):
        pass
    for uid in range(base, base + count):
        if uid in known:
            continue
        fd = os.open(
            os.path.join(lock_dir, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        STATE["uid_lock_fd"] = fd  # closed in every job child (closerange), so only this worker holds it
        return uid
    raise OSError(errno.EBUSY, f"all {count} uids from {base} are held by other sandbox workers")


def _probe():
    """Fork one child that applies every candidate layer; the layers that held are enforced from now."""
    candidates = {"session", "rlimits"}
    if STATE["uid"] is not None:
        candidates.add("uid")
    abi = STATE["landlock_abi"]
    if abi >= 1:
        candidates.add("landlock_fs")
    if abi >= 4:
        candidates.add("landlock_net")
    if abi >= 6:
        candidates.add("landlock_scope")
    if "prog" in _SECCOMP:
        candidates.add("seccomp")
    ENFORCE.update(candidates)
    result = _run_job({"mode": "probe", "timeout_s": 10.0}, b"", b"", b"")
    report = {}
    try:
        report = json.loads(result[1][2] or b"{}")
    except ValueError:
        pass
    out = {}
    for name in sorted(candidates | {"uid", "landlock_fs", "landlock_net", "landlock_scope", "seccomp"}):
        entry = report.get(name)
        if entry is None:
            reason = {
                "uid": _uid_reason(),
                "seccomp": _SECCOMP.get("error", "probe child gave no report"),
                "landlock_net": f"Landlock ABI {abi} < 4 (needs Linux >= 6.7)",
                "landlock_scope": f"Landlock ABI {abi} < 6 (needs Linux >= 6.12)",
            }.get(name)
            out[name] = (
                False,
                reason
                or f"probe child gave no report (exit {result[0].get('exit_code')}, "
                f"stderr {result[1][1][-300:]!r})",
            )
        else:
            out[name] = (bool(entry[0]), entry[1])
    ENFORCE.intersection_update({n for n, (ok, _) in out.items() if ok})
    return out


def _uid_reason():
    if STATE.get("uid_reason"):
        return STATE["uid_reason"]
    if os.geteuid() != 0:
        return (
            f"worker runs as uid {os.geteuid()} (not root): jobs share that uid, so no dedicated uid, "
            "no RLIMIT_NPROC and no uid-wide sweep; run the verifier as root to get them"
        )
    return "job_uid is None in the config"


# ---------------------------------------------------------------------------------------------------
# the child: apply the layers, then run the harness


def _jail(job_dir, fds, timeout_s):
    """Apply every enforced layer in the child; returns {layer: (ok, detail)} (for the probe)."""
    report = {}
    os.setsid()
    report["session"] = (True, "own session and process group (killed as a group)")
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(len(fds), max(1 << 16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the job dies with its worker
    if os.getppid() != STATE["worker_pid"]:
        os._exit(SETUP_FAILED)
    limits = [
        (resource.RLIMIT_AS, CONFIG["memory_limit"]),
        (resource.RLIMIT_FSIZE, CONFIG["file_size_limit"]),
        (resource.RLIMIT_NOFILE, CONFIG["max_open_files"]),
        (resource.RLIMIT_CORE, 0),
    ]
    if "uid" in ENFORCE:  # the kernel ignores RLIMIT_NPROC for root, and a shared uid counts others
        limits.append((resource.RLIMIT_NPROC, CONFIG["max_processes"]))
    cpu = int(timeout_s) + 1
    try:
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        names = "AS, FSIZE, NOFILE, CORE=0, CPU" + (
            ", NPROC" if "uid" in ENFORCE else " (no NPROC: shared uid)"
        )
        report["rlimits"] = (True, names)
    except (OSError, ValueError) as e:
        report["rlimits"] = (False, f"setrlimit failed: {e}")
    os.chdir(job_dir)
    rules = None
    if "landlock_fs" in ENFORCE:
        try:
            rules = _landlock_open_rules(STATE["read_paths"], ["/dev/null"], job_dir)
        except OSError as e:
            report["landlock_fs"] = (False, f"cannot open the job dir for its Landlock rule: {e}")
    if "uid" in ENFORCE:
        uid, gid = STATE["uid"], STATE["gid"]
        try:
            keep = STATE["keep_dac_read_search"]
            if keep:
                _prctl(PR_SET_KEEPCAPS, 1)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            if keep:
                _capset_only(1 << CAP_DAC_READ_SEARCH)
            # a uid change clears the parent-death signal: set it again, and catch a worker that died
            # in between
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != STATE["worker_pid"]:
                os._exit(SETUP_FAILED)
            ok = os.getresuid() == (uid, uid, uid)
            detail = f"jobs run as dedicated uid {uid}"
            if keep:
                detail += (
                    " keeping only CAP_DAC_READ_SEARCH, because the interpreter is not world-readable "
                    "(reads stay confined by Landlock)"
                )
            report["uid"] = (ok, detail)
        except OSError as e:
            report["uid"] = (False, f"cannot switch to uid {uid}: {e}")
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        pass
    abi = STATE["landlock_abi"]
    if rules is not None:
        try:
            _landlock_restrict(
                abi,
                rules,
                net="landlock_net" in ENFORCE,
                scope="landlock_scope" in ENFORCE,
            )
            report["landlock_fs"] = (
                True,
                (
                    f"ABI {abi}: writes only in the job dir; reads only in the "
                    "interpreter's and the system's library dirs"
                ),
            )
            if "landlock_net" in ENFORCE:
                report["landlock_net"] = (True, f"ABI {abi}: TCP bind and connect denied")
            if "landlock_scope" in ENFORCE:
                report["landlock_scope"] = (
                    True,
                    f"ABI {abi}: signals and abstract unix sockets scoped to the job",
                )
        except OSError as e:
            for name in ("landlock_fs", "landlock_net", "landlock_scope"):
                report[name] = (False, f"Landlock failed: {e}")
    if "seccomp" in ENFORCE:
        try:
            _seccomp_apply()
            report["seccomp"] = (
                True,
                (
                    f"BPF filter on {_MACHINE}: AF_UNIX stream sockets only, no connect, "
                    "namespaces, mounts, ptrace, process_vm_*, io_uring, bpf, kill(<0 or worker)"
                ),
            )
        except OSError as e:
            report["seccomp"] = (False, f"seccomp filter failed: {e}")
    return report


def _child(job, source, stdin_r, out_w, err_w, res_w, job_dir):
    """Runs in the forked child; never returns."""
    code = SETUP_FAILED
    try:
        report = _jail(job_dir, [stdin_r, out_w, err_w, res_w], job["timeout_s"])
        if job["mode"] == "probe":
            _write_all(3, json.dumps(_check_effective(report, job_dir)).encode())
            os._exit(0)
        failed = [n for n in ENFORCE if not report.get(n, (False,))[0]]
        if failed:
            _write_all(2, f"sandbox setup failed: {failed} {report}\n".encode())
            os._exit(SETUP_FAILED)
        os.environ.clear()
        os.environ.update(
            {"HOME": job_dir, "TMPDIR": job_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        )
        tempfile.tempdir = job_dir
        code = _harness(job, source)
    except BaseException as e:  # noqa: BLE001 - the child must never return into the worker loop
        try:
            _write_all(2, f"sandbox child failed: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(code)


def _check_effective(report, job_dir):
    """In the probe child: a layer counts only if a forbidden action actually fails under it."""
    import socket

    def fails(action):
        try:
            action()
        except OSError:
            return True
        return False

    # A world-writable place outside the job dir (the work dir, /tmp by default): only Landlock stops it.
    escape = os.path.join(CONFIG["work_dir"], f".rlvr-sandbox-probe-{os.getpid()}")
    checks = {
        "seccomp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close(),
        "landlock_fs": lambda: os.close(os.open(escape, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)),
        "uid": lambda: os.setuid(0),
    }
    for name, action in checks.items():
        ok, detail = report.get(name, (False, ""))
        if ok and not fails(action):
            report[name] = (False, f"applied but not effective: {detail}")
            if name == "landlock_fs":
                os.unlink(escape)
    return report


def _std_streams():
    import io

    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="surrogateescape"
    )
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="surrogateescape"
    )
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def _harness(job, source):
    import atexit
    import builtins
    import threading
    import traceback
    import types

    _std_streams()
    text = source.decode("utf-8", "surrogateescape")
    if job["mode"] == "script":
        sys.argv = ["-c"]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        status = 0
        try:
            exec(compile(text, "<string>", "exec", dont_inherit=True), main.__dict__)  # noqa: S102 - the job
            for thread in threading.enumerate():  # like interpreter shutdown: wait for non-daemon threads
                if thread is not threading.current_thread() and not thread.daemon:
                    thread.join()
            atexit._run_exitfuncs()
        except SystemExit as e:
            status = _exit_status(e)
        except BaseException:  # noqa: BLE001 - an uncaught exception is exit status 1, as in python -c
            traceback.print_exc()
            status = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                status = status or 120
        return status
    if job["mode"] == "call":
        return _call_harness(job, text, builtins)
    raise ValueError(f"unknown harness mode {job['mode']!r}")


def _exit_status(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001, S110 - printing the exit message is best effort, as in CPython
        pass
    return 1


def _call_harness(job, text, builtins):
    # Captured before the untrusted code runs; the parent trusts none of it anyway (it decodes and
    # type-checks every line and compares with expected values that never come here).
    dumps, write, nonce = json.dumps, os.write, job["nonce"]
    tests = json.loads(job["args_json"])

    def emit(record):
        data = (dumps(record, allow_nan=False) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[write(3, view) :]

    namespace = {"__name__": "solution", "__builtins__": builtins}
    exec("from typing import *", namespace)  # noqa: S102 - LeetCode-style solutions annotate with List, Optional, ...
    try:
        exec(compile(text, "<solution>", "exec", dont_inherit=True), namespace)  # noqa: S102 - the job
        fn = _resolve(namespace, job["fn_name"])
    except BaseException as e:  # noqa: BLE001 - a solution that fails to load fails every test
        for i in range(len(tests)):
            emit({"nonce": nonce, "test": i, "error": f"load: {type(e).__name__}"})
        return 0
    for i, args in enumerate(tests):
        try:
            value = fn(*args)
            emit({"nonce": nonce, "test": i, "value": value})
        except BaseException as e:  # noqa: BLE001 - SystemExit included: it must not skip the record
            emit({"nonce": nonce, "test": i, "error": type(e).__name__})
    return 0


def _resolve(namespace, fn_name):
    cls = namespace.get("Solution")
    if isinstance(cls, type) and hasattr(cls, fn_name):
        return getattr(cls(), fn_name)
    fn = namespace.get(fn_name)
    if not callable(fn):
        raise NameError(f"no function {fn_name!r}")  # noqa: TRY004 - what Python raises for a missing name
    return fn


# ---------------------------------------------------------------------------------------------------
# the worker side of one job


def _dir_usage(path, max_files):
    total, count, stack = 0, 0, [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    count += 1
                    if count > max_files:
                        return total, count
                    st = entry.stat(follow_symlinks=False)
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total, count


def _kill_uid(uid):
    """SIGKILL every process of the dedicated job uid, atomically (kill(-1) runs under the tasklist lock,
    so a fork bomb cannot outrun it), from a helper that takes that uid."""
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, but this helper
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def _sweep(child_pid, bound_s=10.0):
    """Kill and reap every process the job left behind. Returns how many leftovers were found alive.

    Every descendant of the job is either a child of this subreaper or below a live one, so "no child
    left" means nothing is left.  Killed processes take a moment to die on a loaded machine: wait for
    them (up to bound_s), re-killing every 50 ms."""
    found = 0
    try:
        os.killpg(child_pid, signal.SIGKILL)
    except OSError:
        pass
    deadline = time.monotonic() + bound_s
    last_kill = 0.0
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found  # no child at all: nothing left
        if pid:
            continue  # reaped one; look again
        now = time.monotonic()
        if now - last_kill >= 0.05:
            alive = _children()  # leftovers: daemons reparented to this subreaper, their children
            found = max(found, len(alive))
            if "uid" in ENFORCE:
                _kill_uid(STATE["uid"])
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            last_kill = now
        if now > deadline:
            _write_all(2, f"rlvr sandbox worker: leftovers still alive after {bound_s} s\n".encode())
            return found
        time.sleep(0.001)


def _children():
    pids = set()
    me = os.getpid()
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            pids.add(int(entry))
                except (OSError, ValueError, IndexError):
                    pass
    return pids


def _run_job(job, source, stdin, args_json):
    """Fork, feed, watch and clean one job. Returns (header, [stdout, stderr, results])."""
    job = dict(job, args_json=args_json.decode() if args_json else "[]")
    timeout_s = float(job["timeout_s"])
    job_dir = tempfile.mkdtemp(prefix="job-", dir=STATE["base_dir"])
    if "uid" in ENFORCE:
        os.chown(job_dir, STATE["uid"], STATE["gid"])
    os.chmod(job_dir, 0o700)
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(job, source, stdin_r, out_w, err_w, res_w, job_dir)
    for fd in (stdin_r, out_w, err_w, res_w):
        os.close(fd)
    limits = {out_r: CONFIG["stdout_limit"], err_r: CONFIG["stderr_limit"], res_r: CONFIG["stdout_limit"]}
    buffers = {out_r: bytearray(), err_r: bytearray(), res_r: bytearray()}
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in buffers:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(stdin_w, False)
        poller.register(stdin_w, select.POLLOUT)
    else:
        os.close(stdin_w)
        stdin_w = -1
    deadline = start + timeout_s
    killed_reason = None
    exited = False
    exit_time = 0.0
    status = None
    rusage = None
    leftovers = 0
    next_disk_check = start + 0.1
    open_fds = set(buffers)

    def kill(reason):
        nonlocal killed_reason
        if killed_reason is None:
            killed_reason = reason
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    while open_fds or not exited:
        now = time.monotonic()
        if now >= deadline and killed_reason is None and not exited:
            kill("timeout")
        # after the deadline (or once the child is gone) pipes must close soon: leftovers are swept
        wait_ms = max(0, min(deadline - now, 0.1)) * 1000 if not exited else 100
        for fd, _event in poller.poll(wait_ms):
            if fd == pidfd:
                _, status, rusage = os.wait4(pid, 0)
                exited = True
                exit_time = time.monotonic()
                poller.unregister(pidfd)
                leftovers += _sweep(pid)  # daemons and background children die with the job
            elif fd == stdin_w:
                try:
                    n = os.write(stdin_w, pending[: 1 << 16])
                    pending = pending[n:]
                except BrokenPipeError:
                    pending = pending[:0]
                except BlockingIOError:
                    continue
                if not pending:
                    poller.unregister(stdin_w)
                    os.close(stdin_w)
                    stdin_w = -1
            else:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = buffers[fd]
                room = limits[fd] - len(buf)
                buf += chunk[:room]
                if len(chunk) > room:
                    kill("output_limit")
        now = time.monotonic()
        if not exited and now >= next_disk_check:
            next_disk_check = now + 0.1
            used, count = _dir_usage(job_dir, CONFIG["max_files"])
            if used > CONFIG["disk_limit"] or count > CONFIG["max_files"]:
                kill("disk_quota")
        if exited and open_fds and now > exit_time + 1.0:
            leftovers += _sweep(pid)  # something still holds a pipe (it should be dead): close our side
            break
    for fd in list(buffers) + [pidfd] + ([stdin_w] if stdin_w >= 0 else []):
        try:
            os.close(fd)
        except OSError:
            pass
    wall = time.monotonic() - start
    shutil.rmtree(job_dir, ignore_errors=True)
    exit_code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    term_signal = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    if killed_reason is None and term_signal == signal.SIGXCPU:
        killed_reason = "timeout"  # RLIMIT_CPU: the CPU-time twin of the wall clock
    if (
        killed_reason is None
        and term_signal == signal.SIGKILL
        and rusage
        and rusage.ru_utime + rusage.ru_stime >= int(timeout_s) + 1
    ):
        killed_reason = "timeout"
    if killed_reason is None and exit_code == SETUP_FAILED and job["mode"] != "probe":
        killed_reason = "setup_failed"
    header = {
        "exit_code": exit_code,
        "signal": term_signal,
        "timed_out": killed_reason == "timeout",
        "killed_reason": killed_reason,
        "wall_s": wall,
        "cpu_s": (rusage.ru_utime + rusage.ru_stime) if rusage else None,
        "max_rss_kb": rusage.ru_maxrss if rusage else None,
        "leftovers_killed": leftovers,
    }
    return header, [bytes(buffers[out_r]), bytes(buffers[err_r]), bytes(buffers[res_r])]


def main():
    global CONTROL_IN, CONTROL_OUT
    # Move the control channel off fds 0/1 so nothing printed by accident can corrupt it.
    CONTROL_IN = os.dup(0)
    CONTROL_OUT = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        header, _ = _read_frame()
        _setup_worker(header["config"])
        _write_frame(
            {
                "op": "ready",
                "pid": os.getpid(),
                "python": sys.executable,
                "version": sys.version.split()[0],
                "layers": LAYERS,
                "enforced": sorted(ENFORCE),
                "job_uid": STATE["uid"] if "uid" in ENFORCE else None,
                "landlock_abi": STATE["landlock_abi"],
                "read_paths": STATE["read_paths"],
            }
        )
        while True:
            try:
                job, blobs = _read_frame()
            except EOFError:
                break
            if job.get("op") == "exit":
                break
            header, outputs = _run_job(job, *blobs)
            _write_frame(dict(header, op="done", id=job.get("id")), outputs)
    except (EOFError, BrokenPipeError):
        pass
    finally:
        if STATE["base_dir"]:
            shutil.rmtree(STATE["base_dir"], ignore_errors=True)


if __name__ == "__main__":
    main()
