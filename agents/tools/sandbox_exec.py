"""Start one stdio tool server confined: `python -I sandbox_exec.py [options] -- program args...`

Run as a script by agents/tools/sandbox.py (the MCP SDK starts the process itself, so the limits
are set here, between the SDK's fork and the server's exec). Standard library only: it runs with
an empty environment, in the server's own working directory, before anything of Warrant is importable.

In order: CPU, address-space, core and file limits (setrlimit) and a wall-clock alarm (kept across
exec), then the server is exec'd with an environment holding only PATH, HOME (its working
directory) and the variables named with --keep; either inside bubblewrap (--bwrap: new namespaces
for everything, the network only with --net, the file system reduced to the system's directories,
Python's and the --ro paths; as root, the user inside is nobody) or, without bubblewrap, as the
unprivileged user --user when started as root.
"""

import argparse
import os
import resource
import signal
import sys

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
NOBODY = 65534
# The system's directories a program needs to run, read-only; /etc only in the parts that say how
# to resolve names, verify TLS and tell the time (not the host's own configuration files).
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt")
ETC = ("/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
       "/etc/localtime", "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
       "/etc/passwd", "/etc/group", "/etc/mime.types")


def _options(argv: list[str]):
    parser = argparse.ArgumentParser(prog="sandbox_exec")
    parser.add_argument("--cpu", type=int, default=60, help="CPU seconds")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address space, MiB")
    parser.add_argument("--wall", type=int, default=3600, help="seconds the server may live")
    parser.add_argument("--cwd", default="/", help="its own working directory (made by the parent)")
    parser.add_argument("--keep", action="append", default=[], help="a variable passed through")
    parser.add_argument("--user", type=int, default=NOBODY, help="uid (and gid) to run as when root")
    parser.add_argument("--bwrap", default="", help="bubblewrap's path: confine with it")
    parser.add_argument("--net", action="store_true", help="under bubblewrap, keep the network")
    parser.add_argument("--ro", action="append", default=[], help="under bubblewrap, a path it may read")
    parser.add_argument("--inside", action="store_true", help="(inside bubblewrap) only drop to --user, then exec")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    if options.command[:1] == ["--"]:
        options.command = options.command[1:]
    if not options.command:
        parser.error("no program given")
    return options


def _limits(options) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (options.cpu, options.cpu + 5))
    memory = options.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024 * 1024, 256 * 1024 * 1024))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(options.wall)  # a pending alarm survives exec: the server is killed when it is due


def _environment(options) -> dict[str, str]:
    env = {"PATH": MINIMAL_PATH, "HOME": options.cwd, "LANG": "C.UTF-8"}
    env.update({name: os.environ[name] for name in options.keep if name in os.environ})
    return env


def _bwrap_argv(options, env: dict[str, str]) -> list[str]:
    argv = [options.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    if not options.net:
        argv.append("--unshare-net")
    inner = list(options.command)
    if os.geteuid() != 0:
        argv.append("--unshare-user")  # unprivileged: bubblewrap needs a user namespace of its own
    else:
        # Root sets the mounts up; inside, this script drops to the unprivileged user before the
        # server runs (the one capability it keeps for that goes with the setuid).
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        inner = [sys.executable, "-I", os.path.abspath(__file__), "--inside", "--user", str(options.user),
                 "--cwd", options.cwd, "--", *inner]
        options.ro.append(os.path.abspath(__file__))
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    made = {"/", "/tmp"}
    for path in dict.fromkeys([*SYSTEM, *ETC, sys.base_prefix, sys.prefix, *options.ro, options.cwd]):
        if not os.path.exists(path):
            continue
        # bubblewrap makes missing parents private to root (0700): an unprivileged server could not
        # reach what is bound below them.
        for parent in reversed(list(_parents(path))):
            if parent not in made:
                made.add(parent)
                argv += ["--perms", "0755", "--dir", parent]
        real = os.path.realpath(path)
        if path == options.cwd:
            argv += ["--bind", real, path]
        elif os.path.islink(path) and os.path.dirname(path) == "/" and real.startswith("/usr/"):
            argv += ["--symlink", real, path]  # /bin -> /usr/bin, as on the host
        else:
            argv += ["--ro-bind", real, path]
    # As root, bubblewrap (with its capabilities dropped) may not enter the server's directory: the
    # server's own user does, inside.
    argv += ([] if os.geteuid() == 0 else ["--chdir", options.cwd]) + ["--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *inner]


def _parents(path: str):
    parent = os.path.dirname(path)
    while parent not in ("/", ""):
        yield parent
        parent = os.path.dirname(parent)


def _drop(user: int) -> None:
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(user)
        os.setuid(user)  # no way back: the saved uid goes too


def main(argv: list[str]) -> None:
    options = _options(argv)
    if options.inside:
        _drop(options.user)
        os.chdir(options.cwd)
        os.execv(options.command[0], options.command)  # the environment bubblewrap set
    _limits(options)
    env = _environment(options)
    if options.bwrap:
        os.execve(options.bwrap, _bwrap_argv(options, env), {"PATH": MINIMAL_PATH})
    os.chdir(options.cwd)
    _drop(options.user)
    os.execve(options.command[0], options.command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
