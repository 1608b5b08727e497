"""The pre-forked sandbox worker: a small stdlib-only process that forks one jailed child per job.

Run by `rlvr_verifiers.sandbox` as `<real python> -I sandbox_worker.py` with an EMPTY environment; it never
imports rlvr_verifiers (nothing but the standard library and ctypes), so its memory holds no secret of the
process that started it, and forking from it is cheap (a few MB).  The trusted parent talks to it over
its stdin/stdout with length-prefixed frames (see `_read_frame` / `_write_frame`).

At start the worker (the "manager") makes itself non-dumpable and a child subreaper, claims a job uid,
sets up its job cgroup, and forks the ZYGOTE (see `_zygote_main`) before any job exists: init of a fresh
PID namespace, in its own mount/network/IPC/UTS namespaces with a minimal read-only root, where the kernel
allows.  The zygote compiles the seccomp filter; then one probe job applies every layer, and the layers
that held are enforced on every job (a job whose child cannot apply one of them aborts with exit code 125:
fail closed).

Per job (see `_run_job` and `_zygote_run`): the manager makes the job's pipes and hands their fds to the
zygote (SCM_RIGHTS); the zygote mounts a fresh noexec tmpfs job dir (or makes a host job dir), raises its
own oom_score_adj to 1000 for the fork (the job inherits it; its /proc is read-only), forks, and gives
the manager a pidfd of the child; the child (see `_jail`) joins the job cgroup, setsid, stdio on the
pipes plus the harness result pipe on fd 3, every other fd closed, rlimits, chdir, a dedicated non-root
uid, no_new_privs, Landlock, seccomp; THEN it reads its job (header, source, call args) from the head of
its own stdin (`_read_job`), so the zygote never holds a job's data and no job can find an earlier one's
in its memory.  The manager feeds stdin, reads stdout/stderr/results with byte caps and enforces the
wall clock; the zygote watches the job dir quota, reaps the child, reads the cgroup's counters, sweeps
every leftover process and drops the job dir.

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
    "sendmsg": 46,
    "sendmmsg": 307,
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
    "sendmsg": 211,
    "sendmmsg": 269,
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
    # -1: every right but EXECUTE (a job-written binary never runs; the tmpfs is noexec too)
    rules.append((os.open(job_dir, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY), -1))
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
                rights = fs & ~LL_EXECUTE if rights == -1 else rights
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
    # sendmsg/sendmmsg are the only way to attach SCM_RIGHTS (descriptors in flight): a job could park
    # memfds and sockets in its own socket's queue, where they outlive every process of the job (until the
    # kernel's unix GC runs), stay charged to the job cgroup and keep abstract socket names bound, and so
    # harm the next job on this worker. send()/sendto()/write() still carry data on a socketpair.
    "sendmsg",
    "sendmmsg",
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


def build_seccomp_filter(parent_pid, *more_pids):
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
    # kill(pid, sig): pid must be >= 0 and none of the protected pids (the zygote, the worker);
    # tkill/tgkill: none of them either
    # (0 too: inside a PID namespace getpgid() of the zygote is 0, and kill(0) is the caller's group)
    pids = list(dict.fromkeys([parent_pid, *more_pids, 0]))
    n = len(pids)
    ins(_BPF_JEQ_K, NR["kill"], 0, 4 + n)
    ins(_BPF_LD_W_ABS, _arg_lo(0))
    ins(_BPF_JSET_K, 0x80000000, n + 1, 0)
    for j, pid in enumerate(pids):
        ins(_BPF_JEQ_K, pid, n - j, 0)
    ins(_BPF_RET_K, _RET_ALLOW)
    deny()
    for name in ("tkill", "tgkill"):
        ins(_BPF_JEQ_K, NR[name], 0, 3 + n)
        ins(_BPF_LD_W_ABS, _arg_lo(0))
        for j, pid in enumerate(pids):
            ins(_BPF_JEQ_K, pid, n - j, 0)
        ins(_BPF_RET_K, _RET_ALLOW)
        deny()
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
    "base_dir": "",  # host job dirs (only without a mount namespace), created by the zygote on demand
    "uid": None,
    "gid": None,
    "keep_dac_read_search": False,
    "read_paths": [],
    "landlock_abi": 0,
    "worker_pid": 0,  # the process jobs are forked from (the zygote), as the jobs see it
    "manager_pid": 0,
    "zygote_pid": 0,  # host pid of the zygote (manager side)
    "zygote_sock": -1,
    "mount_ns": False,  # zygote side: jobs live in the minimal root, job dir = a tmpfs on JOB_DIR
    "cgroup": None,  # {"kind": "v1" | "v2", "dirs": [...], "procs_fds": [...], ...}
}
JOB_DIR = "/job"  # the job dir's path inside the mount namespace


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


_SYSTEM_READ_PATHS = (
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/usr/share/zoneinfo",
)
_DEVICES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")


def _read_paths():
    paths = set()
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), *sys.path]:
        if p and os.path.exists(p):
            paths.add(os.path.realpath(p))
    for p in (*_SYSTEM_READ_PATHS, *_DEVICES[1:], "/proc/self", *CONFIG.get("extra_read_paths", [])):
        if os.path.exists(p):
            paths.add(p if p == "/proc/self" else os.path.realpath(p))
    return sorted(paths)


def _host_namespaces():
    out = {}
    for name in ("mnt", "net", "pid", "ipc"):
        try:
            out[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            out[name] = ""
    return out


def _setup_worker(config):
    CONFIG.update(config)
    CONFIG["host_ns"] = _host_namespaces()
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
        put(
            "non_dumpable",
            _prctl(PR_GET_DUMPABLE) == 0,
            "worker and zygote are non-dumpable (no job can read their memory or environ)",
        )
    except OSError as e:
        put("non_dumpable", False, f"prctl(PR_SET_DUMPABLE) failed: {e}")
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        put("subreaper", True, "orphaned job processes are reparented to the zygote and swept")
    except OSError as e:
        put("subreaper", False, f"prctl(PR_SET_CHILD_SUBREAPER) failed: {e}")

    STATE["manager_pid"] = os.getpid()
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
    _remove_stale_base_dirs(uid)
    owner = f"u{uid}" if uid is not None else f"p{os.getpid()}"
    STATE["base_dir_prefix"] = f"rlvr-sandbox-{owner}-"
    cgroup, cgroup_detail = _cgroup_setup(uid)
    STATE["cgroup"] = cgroup

    zygote = _start_zygote()
    if zygote.get("uid_reason"):
        STATE["uid"] = None
        STATE["uid_reason"] = zygote["uid_reason"]
    STATE["keep_dac_read_search"] = zygote["keep_dac_read_search"]
    ns = zygote["namespaces"]

    probe = _probe(zygote)
    abi = STATE["landlock_abi"]
    for name in ("session", "rlimits", "uid", "landlock_fs", "landlock_net", "landlock_scope", "seccomp"):
        ok, detail = probe.get(name, (False, "not probed"))
        put(name, ok, detail)
    if not abi:
        for name in ("landlock_fs", "landlock_net", "landlock_scope"):
            put(name, False, "kernel has no Landlock (needs Linux >= 5.13 with lsm=landlock)")
    put(
        "zygote",
        True,
        "jobs fork from a zygote started before the first job, which never holds a job's source, "
        "input or output (they travel on the job's own stdin pipe, read by the job itself)",
    )
    for name in ("mount_ns", "net_ns", "pid_ns", "ipc_ns", "cgroup"):
        ok, detail = probe.get(name, (False, "not probed"))
        if not ok and name != "cgroup" and not ns.get(name, (False, ""))[0]:
            detail = ns.get(name, (False, detail))[1]
        if not ok and name == "cgroup" and cgroup is None:
            detail = cgroup_detail
        put(name, ok, detail)
    put("wall_clock", True, "job session killed at its deadline (SIGKILL)")
    put(
        "output_cap",
        True,
        f"stdout capped at {config['stdout_limit']} B (or less per job), stderr at "
        f"{config['stderr_limit']} B; a flood is truncated and the job killed",
    )
    if "mount_ns" in ENFORCE:
        disk = (
            f"job dir is a fresh tmpfs of {config['disk_limit']} B / {config['max_files']} inodes (hard: "
            f"deleted-but-open files count; a full one kills the job), files at "
            f"{config['file_size_limit']} B (RLIMIT_FSIZE)"
        )
    else:
        disk = (
            f"job dir on the host capped at {config['disk_limit']} B / {config['max_files']} entries "
            f"(polled every 100 ms; deleted-but-open files are NOT counted), files at "
            f"{config['file_size_limit']} B (RLIMIT_FSIZE)"
        )
    put("disk_quota", True, disk)
    if "pid_ns" in ENFORCE:
        sweep = "every process left after a job is killed (kill(-1) by the zygote, init of the job's PID namespace)"
    elif "uid" in ENFORCE:
        sweep = "every process left after a job is killed (kill(-1) as the dedicated uid, plus the subreaper's children)"
    else:
        sweep = (
            "every process left after a job is killed (the job's process group and the subreaper's children; "
            "a process that escaped both is missed)"
        )
    put("sweep", layers["subreaper"]["active"], sweep)
    LAYERS.update(layers)


def _remove_stale_base_dirs(uid):
    """Job-dir bases (host job dirs, used only without a mount namespace) left by killed workers: those of
    this worker's uid (uids are claimed exclusively, so nothing else uses them), and those named after a
    worker pid that no longer exists."""
    try:
        names = os.listdir(CONFIG["work_dir"])
    except OSError:
        return
    for name in names:
        owner = name[len("rlvr-sandbox-") :].split("-", 1)[0] if name.startswith("rlvr-sandbox-") else ""
        mine = uid is not None and owner == f"u{uid}"
        dead = owner[:1] == "p" and owner[1:].isdigit() and not os.path.exists(f"/proc/{owner[1:]}")
        if mine or dead:
            _remove_tree(os.path.join(CONFIG["work_dir"], name))


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


# ---------------------------------------------------------------------------------------------------
# cgroups: one accounting unit for a job's whole process tree (memory incl. memfd/tmpfs, pids, CPU)


def _cgroup_paths():
    """{controller: absolute dir of this process's cgroup} for v1, or {"": dir} for v2."""
    v1, v2 = {}, None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers == "":
                v2 = path
            for c in controllers.split(","):
                if c in ("memory", "pids", "cpu"):
                    v1[c] = path
    dirs = {}
    for c, path in v1.items():
        for root in (f"/sys/fs/cgroup/{c}", "/sys/fs/cgroup/cpu,cpuacct" if c == "cpu" else ""):
            if root and os.path.isdir(root):
                dirs[c] = os.path.join(root, path.lstrip("/"))
                break
    if len(dirs) == 3:
        return "v1", dirs
    if v2 is not None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2", {"": os.path.join("/sys/fs/cgroup", v2.lstrip("/"))}
    return None, {}


def _stale_cgroup(name):
    """A job cgroup of a worker that is gone: its pid is dead, or nobody holds its uid's lock."""
    import fcntl

    if name.startswith("rlvr-sandbox-p") and name[14:].isdigit():
        return not os.path.exists(f"/proc/{name[14:]}")
    if not (name.startswith("rlvr-sandbox-u") and name[14:].isdigit()):
        return False
    try:
        fd = os.open(
            os.path.join(CONFIG["uid_lock_dir"], name[14:]), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
        )
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True  # released when fd closes
    except OSError:
        return False
    finally:
        os.close(fd)


def _cg_write(path, value):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def _cgroup_setup(uid):
    """Create this worker's job cgroup (reused job after job: one job runs at a time) with the job limits.
    Named after the claimed uid, so a killed worker's cgroup is reused by its successor, never piled up
    (without a uid: after this worker's pid, and empty ones of dead workers are removed)."""
    if not CONFIG.get("cgroups", True):
        return None, "no per-job cgroup: disabled by SandboxConfig(cgroups=False)"
    if os.geteuid() != 0:
        return None, "no per-job cgroup: the worker is not root (the limits stay per process)"
    try:
        kind, parents = _cgroup_paths()
    except (OSError, ValueError) as e:
        return None, f"no per-job cgroup: cannot read /proc/self/cgroup: {e}"
    if kind is None:
        return None, "no per-job cgroup: no writable memory, pids and cpu controllers found"
    name = f"rlvr-sandbox-u{uid}" if uid is not None else f"rlvr-sandbox-p{os.getpid()}"
    for parent in parents.values():
        try:
            for old in os.listdir(parent):
                if old != name and _stale_cgroup(old):
                    os.rmdir(os.path.join(parent, old))  # a dead worker's; fails (harmless) if not empty
        except OSError:
            pass
    mem, nproc = CONFIG["memory_limit"], CONFIG["max_processes"]
    try:
        dirs = {}
        for c, parent in parents.items():
            d = os.path.join(parent, name)
            os.makedirs(d, exist_ok=True)
            dirs[c] = d
        if kind == "v1":
            _cg_write(os.path.join(dirs["memory"], "memory.limit_in_bytes"), mem)
            memsw = os.path.join(dirs["memory"], "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _cg_write(memsw, mem)
            _cg_write(os.path.join(dirs["pids"], "pids.max"), nproc + 2)  # + the zygote and a sweep helper
            _cg_write(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), 100000)
            _cg_write(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), 100000)
            # Equal between jobs; 4x a plain task's weight, or group scheduling under load delays every
            # short job (measured: 10.8 ms a job at 1024, 4.3 ms at 4096, 5.2 ms without the cgroup).
            _cg_write(os.path.join(dirs["cpu"], "cpu.shares"), 4096)
            oom = (os.path.join(dirs["memory"], "memory.oom_control"), "oom_kill")
            hits = (os.path.join(dirs["memory"], "memory.failcnt"), None)
        else:
            d = dirs[""]
            with open(os.path.join(d, "cgroup.controllers")) as f:
                have = set(f.read().split())
            if not {"memory", "pids", "cpu"} <= have:
                raise OSError(
                    errno.ENOTSUP,
                    f"controllers {sorted({'memory', 'pids', 'cpu'} - have)} not delegated to {d}",
                )
            _cg_write(os.path.join(d, "memory.max"), mem)
            if os.path.exists(os.path.join(d, "memory.swap.max")):
                _cg_write(os.path.join(d, "memory.swap.max"), 0)
            _cg_write(os.path.join(d, "pids.max"), nproc + 2)  # + the zygote and a sweep helper
            _cg_write(os.path.join(d, "cpu.max"), "100000 100000")
            _cg_write(os.path.join(d, "cpu.weight"), 400)  # as cpu.shares 4096 in v1
            oom = (os.path.join(d, "memory.events"), "oom_kill")
            hits = (os.path.join(d, "memory.events"), "max")
    except OSError as e:
        return None, f"no per-job cgroup ({kind}): {e}"
    procs = [os.path.join(d, "cgroup.procs") for d in dirs.values()]
    detail = (
        f"cgroup {kind} per job ({name}): memory {mem >> 20} MiB for the whole process tree (memfd and "
        f"tmpfs included), {nproc} processes, at most 1 CPU at a share equal between jobs; exceeding memory "
        "kills the job"
    )
    return {
        "kind": kind,
        "dirs": list(dirs.values()),
        "procs": procs,
        "oom": oom,
        "hits": hits,
        "detail": detail,
    }, detail


def _cgroup_counter(which):
    """The job cgroup's OOM kills ("oom") or memory-limit hits ("hits"; v1 failcnt, v2 events max)."""
    cg = STATE["cgroup"]
    if not cg:
        return 0
    try:
        text = os.pread(cg[which + "_fd"], 1 << 16, 0).decode()
        key = cg[which][1]
        if key is None:
            return int(text.split()[0])
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return 0


def _cgroup_pids():
    pids = set()
    for fd in (STATE["cgroup"] or {}).get("procs_read_fds", []):
        try:
            pids.update(int(p) for p in os.pread(fd, 1 << 20, 0).split())
        except (OSError, ValueError):
            pass
    return pids


def _cgroup_cleanup():
    for d in (STATE["cgroup"] or {}).get("dirs", []):
        try:
            os.rmdir(d)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------
# the zygote: forked before the first job, it forks every job and never sees a job's data


def _recv_msg(sock, timeout_s=None):
    import socket

    if timeout_s is not None:
        ready, _, _ = select.select([sock], [], [], timeout_s)
        if not ready:
            raise TimeoutError("sandbox zygote did not answer")
    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError("sandbox zygote closed its channel")
    return json.loads(data), fds


def _send_msg(sock, message, fds=()):
    import socket

    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _start_zygote():
    """Fork the zygote (pid 1 of a fresh PID namespace where the kernel allows) and wait for its hello."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid_ns = (False, "disabled by SandboxConfig(namespaces=False)")
    if CONFIG.get("namespaces", True):
        try:
            _syscall(NR["unshare"], ctypes.c_ulong(CLONE_NEWPID))
            pid_ns = (True, "")
        except OSError as e:
            pid_ns = (False, f"unshare(CLONE_NEWPID) failed: {e} (needs root or user namespaces)")
    pid = os.fork()
    if pid == 0:
        ours.close()
        code = 1
        try:
            _zygote_main(theirs)
            code = 0
        except BaseException as e:  # noqa: BLE001 - the zygote never returns into the manager's code
            try:
                _write_all(2, f"rlvr sandbox zygote failed: {type(e).__name__}: {e}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    theirs.close()
    STATE["zygote_pid"] = pid
    STATE["zygote_sock"] = ours
    hello, _ = _recv_msg(ours, CONFIG.get("start_timeout_s", 30.0))
    if not pid_ns[0]:
        hello["namespaces"]["pid_ns"] = pid_ns
    return hello


def _zygote_main(sock):
    ENFORCE.clear()
    STATE["worker_pid"] = os.getpid()  # 1 inside a fresh PID namespace
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() not in (STATE["manager_pid"], 0):  # 0: the manager is outside our PID namespace
        os._exit(1)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    for fd in (CONTROL_IN, CONTROL_OUT):  # the manager's channel to its parent is not ours
        os.close(fd)
    cg = STATE["cgroup"]
    if cg:
        # The zygote joins the job cgroup once, so every job is born in it: moving a process between
        # cgroups waits for an RCU grace period (~6 ms a job here), forking into the parent's does not. Its
        # ~10 MB count against the job's memory; the cgroup's OOM killer picks a job (each raises its own
        # oom_score_adj to the maximum), never the zygote.
        for path in cg["procs"]:
            _cg_write(path, 0)
        # counters and the member list, opened before the root changes
        cg["oom_fd"] = os.open(cg["oom"][0], os.O_RDONLY)
        cg["hits_fd"] = os.open(cg["hits"][0], os.O_RDONLY)
        cg["procs_read_fds"] = [os.open(p, os.O_RDONLY) for p in cg["procs"]]
        _zygote_oom_fd()
    namespaces = _enter_namespaces()
    LAYERS_FROM_ZYGOTE.update({name: detail for name, (ok, detail) in namespaces.items() if ok})
    stdlib = os.path.dirname(os.__file__)
    hello = {"op": "zygote", "namespaces": namespaces}
    keep = STATE["uid"] is not None and not _world_readable_tree(stdlib)
    if keep and not STATE["landlock_abi"]:
        # The job uid could not import the stdlib, and nothing would confine a kept capability.
        STATE["uid"] = None
        hello["uid_reason"] = (
            f"the interpreter ({stdlib}) is not readable by the job uid and there is no Landlock to "
            "confine CAP_DAC_READ_SEARCH; install Python world-readable or set SandboxConfig.python"
        )
        keep = False
    STATE["keep_dac_read_search"] = keep
    hello["keep_dac_read_search"] = keep
    try:
        # Inside a PID namespace the manager's pid means nothing (and naming it would tell it to a prober)
        protected = [] if os.getpid() == 1 else [STATE["manager_pid"]]
        buf, n = build_seccomp_filter(os.getpid(), *protected)
        _SECCOMP["buf"] = ctypes.create_string_buffer(buf, len(buf))
        _SECCOMP["prog"] = _SockFprog(n, ctypes.addressof(_SECCOMP["buf"]))
    except OSError as e:
        _SECCOMP["error"] = str(e)
    hello["seccomp_error"] = _SECCOMP.get("error")
    _send_msg(sock, hello)
    try:
        while True:
            try:
                message, fds = _recv_msg(sock)
            except EOFError:
                return
            if message.get("op") != "spawn":
                for fd in fds:
                    os.close(fd)
                continue
            _send_msg(sock, _zygote_run(sock, message, fds))
    finally:
        if STATE["base_dir"]:
            _remove_tree(STATE["base_dir"])


def _enter_namespaces():
    """Own mount, network, IPC and UTS namespaces with a minimal read-only root (only the read paths,
    bind-mounted read-only at their own paths, a fresh /proc of our PID namespace, and JOB_DIR).
    Returns {layer: (ok, detail)}; on any failure the zygote keeps the host's view for that part."""
    if not CONFIG.get("namespaces", True):
        return {
            n: (False, "disabled by SandboxConfig(namespaces=False)")
            for n in ("mount_ns", "net_ns", "ipc_ns")
        }
    out = {}
    in_pid_ns = os.getpid() == 1
    out["pid_ns"] = (
        in_pid_ns,
        "jobs live in their own PID namespace (no host pid can be seen or probed); the zygote is its init"
        if in_pid_ns
        else "the zygote is not init of a fresh PID namespace",
    )
    for name, flag in (("net_ns", CLONE_NEWNET), ("ipc_ns", CLONE_NEWIPC)):
        try:
            _syscall(NR["unshare"], ctypes.c_ulong(flag))
            out[name] = (
                True,
                "own network namespace: no interface but a down loopback, no host sockets in /proc/net, "
                "abstract unix names private"
                if name == "net_ns"
                else "own IPC namespace: no SysV/POSIX IPC object of the host",
            )
        except OSError as e:
            out[name] = (False, f"unshare({name}) failed: {e} (needs root or user namespaces)")
    try:
        _syscall(NR["unshare"], ctypes.c_ulong(CLONE_NEWNS | CLONE_NEWUTS))
    except OSError as e:
        out["mount_ns"] = (False, f"unshare(CLONE_NEWNS) failed: {e} (needs root or user namespaces)")
        return out
    try:
        _minimal_root(in_pid_ns)
        STATE["mount_ns"] = True
        out["mount_ns"] = (
            True,
            "own mount namespace: a read-only root holding only the interpreter, its stdlib and the "
            "system libraries; no host file can even be stat()ed or watched",
        )
    except OSError as e:
        out["mount_ns"] = (False, f"cannot build the minimal root: {e}")
    try:
        name = b"rlvr-sandbox"
        _libc.sethostname(name, ctypes.c_size_t(len(name)))
    except OSError:
        pass
    return out


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
# The jobs' /proc is read-only: no job writes a /proc file (its oom_score_adj above all: without
# CAP_SYS_RESOURCE the kernel lets a process lower it back to 0, making the zygote a likelier OOM victim).
# The zygote raises each job's oom_score_adj through an fd it opened before (see _zygote_oom_fd).
PROC_FLAGS = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x20000000,
    0x40000000,
)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _mount(source, target, fstype, flags, data=None):
    def b(x):
        return x.encode() if isinstance(x, str) else x

    if _libc.mount(b(source), b(target), b(fstype), flags, b(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _minimal_root(fresh_proc):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    sources = []  # (path inside the new root, O_PATH fd of the host object, is a device)
    links = {}  # symlinks on the way to a read path (/lib -> usr/lib), recreated in the new root
    wanted = [p for p in STATE["read_paths"] if p != "/proc/self"] + list(_DEVICES)
    for raw in (*_SYSTEM_READ_PATHS, *_DEVICES):
        parts = raw.split("/")
        for i in range(2, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if os.path.islink(prefix):
                links[prefix] = os.readlink(prefix)
    bound = []
    for path in sorted(set(wanted)):
        if not os.path.exists(path) or any(path.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        bound.append(path)
        sources.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), path in _DEVICES))
    root = CONFIG["work_dir"]  # any existing dir will do: the tmpfs hides it in this namespace only
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    pivoted = False
    try:
        for path, fd, device in sources:
            target = root + path
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.makedirs(target, mode=0o755, exist_ok=True)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV)
            _mount(None, target, None, flags)
        for link, dest in links.items():
            target = root + link
            if not os.path.lexists(target):
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                os.symlink(dest, target)
        os.makedirs(root + "/proc", mode=0o755, exist_ok=True)
        if fresh_proc:
            try:
                _mount("proc", root + "/proc", "proc", PROC_FLAGS, "hidepid=invisible")
            except OSError:
                _mount("proc", root + "/proc", "proc", PROC_FLAGS)
        else:
            raise OSError(errno.EPERM, "no fresh /proc without a PID namespace")
        os.makedirs(root + JOB_DIR, mode=0o755, exist_ok=True)
        for d in ("", "/usr", "/etc", "/dev", "/root"):
            if os.path.isdir(root + d):
                os.chmod(root + d, 0o755)
        _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096")
        os.chdir(root)
        _syscall(NR["pivot_root"], b".", b".")
        pivoted = True
        if _libc.umount2(b".", MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount of the old root: {os.strerror(err)}")
        os.chdir("/")
    except OSError:
        if not pivoted:  # back to the host's view (host job dirs must not land in our small tmpfs)
            os.chdir("/")
            _libc.umount2(root.encode(), MNT_DETACH)
        raise
    finally:
        for _, fd, _ in sources:
            os.close(fd)


def _zygote_oom_fd():
    """Open the zygote's own oom_score_adj for writing while /proc is still writable (the jobs' /proc is
    mounted read-only). Per job the zygote sets it to 1000 just before the fork (the child inherits it, so
    the cgroup's OOM killer takes a job before the zygote) and back to its own value just after."""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
        STATE["oom_adj_fd"], STATE["oom_adj_own"] = fd, os.pread(fd, 16, 0).strip() or b"0"
    except OSError:
        STATE["oom_adj_fd"] = None


def _set_oom_adj(value):
    fd = STATE.get("oom_adj_fd")
    if fd is not None:
        os.pwrite(fd, value, 0)


def _zygote_run(sock, message, fds):
    """Fork one job, report its pidfd, supervise it (disk), reap it, sweep its leftovers."""
    ENFORCE.clear()
    ENFORCE.update(message["enforce"])
    timeout_s = float(message["timeout_s"])
    job_dir, dir_fd = _make_job_dir()
    oom_before, hits_before = _cgroup_counter("oom"), _cgroup_counter("hits")
    if "cgroup" in ENFORCE:
        _set_oom_adj(b"1000")  # inherited by the job (it cannot lower it: its /proc is read-only)
    try:
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(fds, job_dir, timeout_s)
    finally:
        if "cgroup" in ENFORCE:
            _set_oom_adj(STATE.get("oom_adj_own", b"0"))
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    try:
        _send_msg(sock, {"op": "spawned"}, [pidfd])
        killed_reason = None
        disk_limit, max_files = CONFIG["disk_limit"], CONFIG["max_files"]
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while not poller.poll(50):
            if _disk_full(job_dir, dir_fd, disk_limit, max_files):
                killed_reason = "disk_quota"
                _kill_job(pid)
        _, status, rusage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    if killed_reason is None and _disk_full(job_dir, dir_fd, disk_limit, max_files):
        killed_reason = "disk_quota"  # the job hit the tmpfs limit and gave up on its own
    leftovers = _sweep(pid)
    if killed_reason is None and _cgroup_counter("oom") > oom_before:
        killed_reason = "memory_limit"  # the cgroup's OOM killer took a process of the job
    failed = not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0
    if killed_reason is None and failed and _cgroup_counter("hits") > hits_before:
        killed_reason = "memory_limit"  # it failed after an allocation was refused at the job's limit
    _drop_job_dir(job_dir, dir_fd)
    return {
        "op": "exited",
        "status": status,
        "cpu_s": rusage.ru_utime + rusage.ru_stime,
        "max_rss_kb": rusage.ru_maxrss,
        "leftovers": leftovers,
        "killed_reason": killed_reason,
    }


def _make_job_dir():
    if STATE["mount_ns"]:
        uid = STATE["uid"] if "uid" in ENFORCE else os.geteuid()
        options = (
            f"size={CONFIG['disk_limit']},nr_inodes={CONFIG['max_files'] + 1},mode=0700,uid={uid},gid={uid}"
        )
        _mount(
            "tmpfs", JOB_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options
        )  # no job-written binary runs
        return JOB_DIR, os.open(JOB_DIR, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    if not STATE["base_dir"]:
        base = tempfile.mkdtemp(prefix=STATE["base_dir_prefix"], dir=CONFIG["work_dir"])
        os.chmod(base, 0o711)
        STATE["base_dir"] = base
    job_dir = tempfile.mkdtemp(prefix="job-", dir=STATE["base_dir"])
    if "uid" in ENFORCE:
        os.chown(job_dir, STATE["uid"], STATE["gid"])
    os.chmod(job_dir, 0o700)
    return job_dir, -1


def _disk_full(job_dir, dir_fd, disk_limit, max_files):
    if dir_fd >= 0:  # our tmpfs: the kernel counts every byte (deleted-but-open files too)
        st = os.fstatvfs(dir_fd)
        return st.f_bavail == 0 or st.f_favail == 0
    used, count = _dir_usage(job_dir, max_files)
    return used > disk_limit or count > max_files


def _drop_job_dir(job_dir, dir_fd):
    if dir_fd >= 0:
        os.close(dir_fd)
        if _libc.umount2(JOB_DIR.encode(), MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), "cannot unmount the job dir")
    else:
        _remove_tree(job_dir)


def _kill_job(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _probe(zygote):
    """Run one probe job that applies every candidate layer; the layers that held are enforced from now."""
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
    if not zygote.get("seccomp_error"):
        candidates.add("seccomp")
    for name, (ok, _detail) in zygote["namespaces"].items():
        if ok:
            candidates.add(name)
    if STATE["cgroup"]:
        candidates.add("cgroup")
    ENFORCE.update(candidates)
    result = _run_job({"mode": "probe", "timeout_s": 10.0}, b"", b"", b"")
    report = {}
    try:
        report = json.loads(result[1][2] or b"{}")
    except ValueError:
        pass
    out = {}
    names = {"uid", "landlock_fs", "landlock_net", "landlock_scope", "seccomp", "mount_ns", "net_ns"}
    for name in sorted(candidates | names | {"pid_ns", "ipc_ns", "cgroup"}):
        entry = report.get(name)
        if entry is None:
            reason = {
                "uid": _uid_reason(),
                "seccomp": zygote.get("seccomp_error") or "probe child gave no report",
                "landlock_net": f"Landlock ABI {abi} < 4 (needs Linux >= 6.7)",
                "landlock_scope": f"Landlock ABI {abi} < 6 (needs Linux >= 6.12)",
            }.get(name)
            if name not in candidates and name in zygote["namespaces"]:
                reason = zygote["namespaces"][name][1]
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
# the child: apply the layers, read the job from its own stdin, then run the harness


def _jail(job_dir, fds, timeout_s):
    """Apply every enforced layer in the child; returns {layer: (ok, detail)} (for the probe)."""
    report = {}
    os.setsid()
    report["session"] = (True, "own session and process group (killed as a group)")
    for name, detail in LAYERS_FROM_ZYGOTE.items():  # entered once by the zygote, inherited by the fork
        report[name] = (True, detail)
    cg = STATE["cgroup"]
    if "cgroup" in ENFORCE and cg:  # born in it (the zygote's); the probe checks /proc/self/cgroup
        try:
            with open("/proc/self/oom_score_adj") as f:  # raised by the zygote for the fork
                adj = f.read().strip()
            if adj == "1000":  # this job's processes go first when its cgroup runs out of memory
                report["cgroup"] = (True, cg["detail"])
            else:
                report["cgroup"] = (False, f"the job's oom_score_adj is {adj}, not 1000")
        except OSError as e:
            report["cgroup"] = (False, f"cannot read the job's oom_score_adj: {e}")
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(len(fds), max(1 << 16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the job dies with its zygote
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
            # a uid change clears the parent-death signal: set it again, and catch a zygote that died
            # in between
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if not keep:
                # Its own /proc files (maps, mem, status) belong to the job uid again, as under `python -c`;
                # that uid is this worker's alone, and ptrace/process_vm_* stay denied by seccomp.
                _prctl(PR_SET_DUMPABLE, 1)
            if os.getppid() != STATE["worker_pid"]:
                os._exit(SETUP_FAILED)
            ok = os.getresuid() == (uid, uid, uid)
            detail = f"jobs run as dedicated uid {uid} with no capability"
            if keep:
                detail = (
                    f"jobs run as dedicated uid {uid} keeping only CAP_DAC_READ_SEARCH, because the "
                    "interpreter is not world-readable (reads stay confined by Landlock)"
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
                    f"BPF filter on {_MACHINE}: AF_UNIX stream sockets only, no connect, sendmsg, "
                    "namespaces, mounts, ptrace, process_vm_*, io_uring, bpf, kill(<0 or worker)"
                ),
            )
        except OSError as e:
            report["seccomp"] = (False, f"seccomp filter failed: {e}")
    return report


def _read_job():
    """The job, from the head of this child's own stdin: 4-byte length, JSON header, source, call args.
    Read with exact-size os.read calls, so the program's stdin starts right after it."""
    (size,) = struct.unpack(">I", _read_exact(0, 4))
    job = json.loads(_read_exact(0, size))
    source = _read_exact(0, job["source_len"]) if job["source_len"] else b""
    args = _read_exact(0, job["args_len"]) if job["args_len"] else b""
    job["args_json"] = args.decode() if args else "[]"
    return job, source


def _child(fds, job_dir, timeout_s):
    """Runs in the forked child; never returns."""
    code = SETUP_FAILED
    try:
        report = _jail(job_dir, fds, timeout_s)
        job, source = _read_job()
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
    except BaseException as e:  # noqa: BLE001 - the child must never return into the zygote loop
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

    def write_escape():
        os.close(os.open(escape, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(escape)

    checks = {
        "seccomp": [lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()],
        # writing outside the job dir, and listing "/" (outside every read rule; in the minimal root the
        # write would fail anyway, the listing only under Landlock)
        "landlock_fs": [write_escape, lambda: os.listdir("/")],
        "uid": [lambda: os.setuid(0)],
        "mount_ns": [lambda: os.stat("/etc/passwd"), lambda: os.stat("/root/.bashrc")],
    }
    for name, actions in checks.items():
        ok, detail = report.get(name, (False, ""))
        if ok and not all(fails(action) for action in actions):
            report[name] = (False, f"applied but not effective: {detail}")
    host = CONFIG["host_ns"]
    for name, ns in (("net_ns", "net"), ("pid_ns", "pid"), ("ipc_ns", "ipc")):
        if name in ENFORCE:
            try:
                own = os.readlink(f"/proc/self/ns/{ns}")
            except OSError as e:
                report[name] = (False, f"cannot read /proc/self/ns/{ns}: {e}")
                continue
            report[name] = (own != host[ns] and bool(host[ns]), LAYERS_FROM_ZYGOTE.get(name, ""))
    if "cgroup" in ENFORCE and report.get("cgroup", (False,))[0]:
        with open("/proc/self/cgroup") as f:
            mine = f.read()
        if "rlvr-sandbox-" not in mine:
            report["cgroup"] = (False, f"applied but not effective: {mine.strip()[:200]}")
    return report


LAYERS_FROM_ZYGOTE = {}  # zygote side: layer -> detail of the namespaces it entered


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


def _bound_encoder():
    """A JSON encoder for the harness's result lines, made of objects bound NOW, before the job's code
    runs: builtin types and their C-level methods (which no Python code can patch), the C string
    escaper, and no lookup of json.JSONEncoder, json.dumps or any builtins name at call time."""
    from json import encoder as json_encoder

    escape = getattr(json_encoder, "c_encode_basestring_ascii", None) or json_encoder.encode_basestring_ascii
    type_, issub = type, issubclass
    str_t, int_t, float_t, list_t, tuple_t, dict_t = str, int, float, list, tuple, dict
    int_repr, float_repr, dict_items, list_new = int.__repr__, float.__repr__, dict.items, list
    join, value_error, type_error = ", ".join, ValueError, TypeError
    non_finite = ("nan", "inf", "-inf")

    def key(k):
        t = type_(k)
        if issub(t, str_t):
            return escape(k)
        if k is True or k is False or k is None:
            return '"' + ("true" if k is True else "false" if k is False else "null") + '"'
        if issub(t, int_t):
            return '"' + int_repr(k) + '"'
        if issub(t, float_t):
            r = float_repr(k)
            if r in non_finite:
                raise value_error("non-finite float key")
            return '"' + r + '"'
        raise type_error("unsupported key type")

    def encode(v):
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        t = type_(v)
        if issub(t, str_t):
            return escape(v)
        if issub(t, int_t):
            return int_repr(v)
        if issub(t, float_t):
            r = float_repr(v)
            if r in non_finite:
                raise value_error("non-finite float")
            return r
        if issub(t, (list_t, tuple_t)):
            return "[" + join([encode(x) for x in list_new(v)]) + "]"
        if issub(t, dict_t):
            return "{" + join([key(k) + ": " + encode(x) for k, x in list_new(dict_items(v))]) + "}"
        raise type_error("not a JSON value")

    return encode, escape, int_repr


def _call_harness(job, text, builtins):
    # Everything the result channel uses is bound here, before the untrusted code runs: the encoder,
    # os.write, and every builtin name (the job may replace json, builtins.*, BaseException, ...).
    encode, escape, int_repr = _bound_encoder()
    write, view_of, enumerate_, len_, range_ = os.write, memoryview, enumerate, len, range
    base_exception, type_, str_t = BaseException, type, str
    nonce = escape(job["nonce"])
    tests = json.loads(job["args_json"])
    head = '{"nonce": ' + nonce + ', "test": '

    def emit(i, kind, payload):
        data = (head + int_repr(i) + ', "' + kind + '": ' + payload + "}\n").encode()
        view = view_of(data)
        while view:
            view = view[write(3, view) :]

    def error_name(e, prefix=""):
        name = type_(e).__name__
        return escape(prefix + (name if type_(name) is str_t else "Exception"))

    namespace = {"__name__": "solution", "__builtins__": builtins}
    exec("from typing import *", namespace)  # noqa: S102 - LeetCode-style solutions annotate with List, Optional, ...
    try:
        exec(compile(text, "<solution>", "exec", dont_inherit=True), namespace)  # noqa: S102 - the job
        fn = _resolve(namespace, job["fn_name"])
    except base_exception as e:  # noqa: BLE001 - a solution that fails to load fails every test
        for i in range_(len_(tests)):
            emit(i, "error", error_name(e, "load: "))
        return 0
    for i, args in enumerate_(tests):
        try:
            value = fn(*args)
        except base_exception as e:  # noqa: BLE001 - SystemExit included: it must not skip the record
            emit(i, "error", error_name(e))
            continue
        try:
            payload = encode(value)
        except base_exception as e:  # noqa: BLE001 - not JSON (or too deep): an error, not a crash
            emit(i, "error", error_name(e, "result: "))
            continue
        emit(i, "value", payload)
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
# the zygote side of one job: usage, cleanup, sweep


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


def _remove_tree(path, max_steps=1_000_000):
    """Remove a directory tree iteratively: no recursion (1,500 nested dirs are fine), one open dir fd at
    a time (no PATH_MAX limit), bounded steps. Never follows symlinks. Errors are reported, not raised."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    names = []  # the path from `path` down to fd, as names
    steps = 0
    try:
        while steps < max_steps:
            steps += 1
            descend = None
            try:
                os.chmod(fd, 0o700)
            except OSError:
                pass
            with os.scandir(fd) as entries:
                for entry in entries:
                    steps += 1
                    if entry.is_dir(follow_symlinks=False):
                        descend = entry.name
                        break
                    try:
                        os.unlink(entry.name, dir_fd=fd)
                    except FileNotFoundError:
                        pass
            if descend is not None:
                child = os.open(descend, flags, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(descend)
                continue
            if not names:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    except OSError as e:
        _write_all(2, f"rlvr sandbox worker: cannot remove {path}: {e}\n".encode())
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            _write_all(2, f"rlvr sandbox worker: cannot remove {path}: {e}\n".encode())


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
    them (up to bound_s), re-killing every 50 ms.  As init of the jobs' PID namespace, kill(-1) reaches
    every one of them at once."""
    found = 0
    try:
        os.killpg(child_pid, signal.SIGKILL)
    except OSError:
        pass
    deadline = time.monotonic() + bound_s
    last_kill = 0.0
    pid_ns = "pid_ns" in ENFORCE and os.getpid() == 1
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
            if pid_ns:
                try:
                    os.kill(-1, signal.SIGKILL)  # init of the namespace: every process in it but us
                except OSError:
                    pass
            elif "uid" in ENFORCE:
                _kill_uid(STATE["uid"])
            for pid in alive | (_cgroup_pids() - {os.getpid()} if not pid_ns else set()):
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
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            pids.add(int(entry))
                except (OSError, ValueError, IndexError):
                    pass
    return pids


# ---------------------------------------------------------------------------------------------------
# the manager side of one job: I/O with byte caps and the wall clock (it holds job data, never forks)


def _run_job(job, source, stdin, args_json):
    """Spawn one job through the zygote, feed it, watch it. Returns (header, [stdout, stderr, results])."""
    timeout_s = float(job["timeout_s"])
    stdout_limit = min(int(job.get("stdout_limit") or CONFIG["stdout_limit"]), CONFIG["stdout_limit"])
    head = json.dumps(
        {
            "mode": job["mode"],
            "nonce": job.get("nonce", ""),
            "fn_name": job.get("fn_name"),
            "source_len": len(source),
            "args_len": len(args_json),
        }
    ).encode()
    frame = b"".join((struct.pack(">I", len(head)), head, source, args_json, stdin))
    zsock = STATE["zygote_sock"]
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    start = time.monotonic()
    try:
        _send_msg(
            zsock,
            {"op": "spawn", "timeout_s": timeout_s, "enforce": sorted(ENFORCE)},
            [stdin_r, out_w, err_w, res_w],
        )
    finally:
        for fd in (stdin_r, out_w, err_w, res_w):
            os.close(fd)
    reply, fds = _recv_msg(zsock, 60.0)
    if reply.get("op") != "spawned" or len(fds) != 1:
        raise EOFError(f"sandbox zygote refused the job: {reply}")
    pidfd = fds[0]
    limits = {out_r: stdout_limit, err_r: CONFIG["stderr_limit"], res_r: CONFIG["stdout_limit"]}
    buffers = {out_r: bytearray(), err_r: bytearray(), res_r: bytearray()}
    poller = select.poll()
    for fd in buffers:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(zsock.fileno(), select.POLLIN)
    pending = memoryview(frame)
    os.set_blocking(stdin_w, False)
    poller.register(stdin_w, select.POLLOUT)
    deadline = start + timeout_s
    killed_reason = None
    exited = None
    exit_time = 0.0
    open_fds = set(buffers)

    def kill(reason):
        nonlocal killed_reason
        if killed_reason is None:
            killed_reason = reason
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass

    try:
        while open_fds or exited is None:
            now = time.monotonic()
            if now >= deadline and killed_reason is None and exited is None:
                kill("timeout")
            if exited is None and now > deadline + 60.0:
                raise TimeoutError("sandbox zygote did not report the job's end")
            wait_ms = max(0, min(deadline - now, 0.1)) * 1000 if exited is None else 100
            for fd, _event in poller.poll(wait_ms):
                if fd == zsock.fileno():
                    exited, extra = _recv_msg(zsock)
                    for extra_fd in extra:
                        os.close(extra_fd)
                    exit_time = time.monotonic()
                    poller.unregister(fd)
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
            if exited is not None and open_fds and time.monotonic() > exit_time + 1.0:
                break  # swept by the zygote already; whatever still holds a pipe is not ours to wait for
    finally:
        for fd in [*buffers, pidfd, *([stdin_w] if stdin_w >= 0 else [])]:
            try:
                os.close(fd)
            except OSError:
                pass
    wall = time.monotonic() - start
    status = exited["status"]
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    term_signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if killed_reason is None:
        killed_reason = exited.get("killed_reason")
    if killed_reason is None and term_signal == signal.SIGXCPU:
        killed_reason = "timeout"  # RLIMIT_CPU: the CPU-time twin of the wall clock
    if killed_reason is None and term_signal == signal.SIGKILL and exited["cpu_s"] >= int(timeout_s) + 1:
        killed_reason = "timeout"
    if killed_reason is None and exit_code == SETUP_FAILED and job["mode"] != "probe":
        killed_reason = "setup_failed"
    header = {
        "exit_code": exit_code,
        "signal": term_signal,
        "timed_out": killed_reason == "timeout",
        "killed_reason": killed_reason,
        "wall_s": wall,
        "cpu_s": exited["cpu_s"],
        "max_rss_kb": exited["max_rss_kb"],
        "leftovers_killed": exited["leftovers"],
        "stdout_limit": stdout_limit,
    }
    return header, [bytes(buffers[out_r]), bytes(buffers[err_r]), bytes(buffers[res_r])]


def _shutdown(signum=None, frame=None):
    raise SystemExit(0)


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
    signal.signal(signal.SIGTERM, _shutdown)  # a polite stop (Ray's) still cleans up
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
        _stop_zygote()
        _cgroup_cleanup()


def _stop_zygote():
    """Close the zygote's channel (it removes its job-dir base and exits) and reap it, bounded."""
    sock, pid = STATE["zygote_sock"], STATE["zygote_pid"]
    if sock == -1 or not pid:
        return
    sock.close()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


if __name__ == "__main__":
    main()
