"""Which words of an argv name files the program writes, moves or deletes (a table per program).

``rm``: all operands; ``mv``: all (the sources go away); ``cp``/``install``/``ln``/``rsync``: the last
operand or ``-t``; ``tee``: all; ``sed -i``/``perl -i``: the files; ``dd of=``; ``tar -x -C DIR``;
``unzip -d``; ``curl -o``; ``wget -O``/``-P``; editors: their files; ``find -delete``: the starting
points; package managers: ``--target``/``--prefix``/``--root``; anything else: ``-o``/``--output``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

__all__ = ["split_options", "written_words"]

_MODE = re.compile(r"[-+=][rwxXst]+|[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*|[0-7]{3,4}")


def split_options(
    args: Sequence[str], value_letters: str = "", value_longs: tuple[str, ...] = ()
) -> tuple[dict[str, list[str]], list[str]]:
    """Options (with values) and operands, options anywhere (GNU style), ``--`` ends options."""
    values: dict[str, list[str]] = {}
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if not eq and name in value_longs:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            values.setdefault(name, []).append(value)
        elif arg.startswith("-") and len(arg) > 1:
            for j, letter in enumerate(arg[1:], start=1):
                if letter in value_letters:
                    value = arg[j + 1 :]
                    if not value:
                        value = args[i + 1] if i + 1 < len(args) else ""
                        i += 1
                    values.setdefault("-" + letter, []).append(value)
                    break
                values.setdefault("-" + letter, []).append("")
        else:
            operands.append(arg)
        i += 1
    return values, operands


def written_words(argv: Sequence[str]) -> list[str]:
    """The words of ``argv`` naming files it writes, moves or deletes."""
    if not argv:
        return []
    program, args = argv[0], list(argv[1:])
    match program:
        case "rm" | "rmdir" | "unlink" | "shred" | "srm" | "wipe" | "trash" | "trash-put" | "touch":
            return split_options(args, "s" if program == "shred" else "dtr" if program == "touch" else "")[1]
        case "mkdir" | "mkfifo" | "mknod":
            return (
                split_options(args, "m", ("--mode",))[1][:1]
                if program == "mknod"
                else split_options(args, "m", ("--mode",))[1]
            )
        case "truncate":
            return split_options(args, "sr", ("--size", "--reference"))[1]
        case "install" if "-d" in args or "--directory" in args:
            return split_options(args, "mog", ("--mode", "--owner", "--group"))[1]
        case "mv" | "cp" | "install" | "ln" | "link" | "rsync" | "scp":
            values, operands = split_options(
                args,
                "tSmogeBb" if program != "rsync" else "eBTfM",
                (
                    "--target-directory",
                    "--suffix",
                    "--mode",
                    "--owner",
                    "--group",
                    "--rsh",
                    "--rsync-path",
                    "--filter",
                    "--exclude",
                    "--include",
                    "--temp-dir",
                ),
            )
            target = values.get("-t", []) + values.get("--target-directory", [])
            local = [w for w in operands if not re.match(r"^[^/]*:", w)]
            if program == "mv":
                return operands + target
            if target:
                return target
            return local[-1:] if len(operands) > 1 else []
        case "tee":
            return split_options(args)[1]
        case "dd":
            return [arg[3:] for arg in args if arg.startswith("of=")]
        case "sed" | "gsed" | "perl" | "ruby":
            values, operands = split_options(
                args, "efl" if program.endswith("sed") else "eEIMmx", ("--expression", "--file")
            )
            inplace = any(k.startswith(("-i", "--in-place")) for k in values) or any(
                a.startswith("-i") for a in args
            )
            if not inplace:
                return []
            if program.endswith("sed") and not (
                values.get("-e") or values.get("--expression") or values.get("-f")
            ):
                operands = operands[1:]
            return operands if program.endswith("sed") else ([] if values.get("-e") is None else operands)
        case "chmod" if any(_MODE.fullmatch(arg) for arg in args if arg.startswith("-")):
            # `chmod -x FILE`: a mode that looks like an option; the other words are the files
            return [arg for arg in args if not arg.startswith("-") and not _MODE.fullmatch(arg)]
        case "chmod" | "chown" | "chgrp" | "setfacl" | "chcon":
            values, operands = split_options(args, "", ("--reference",))
            return operands if "--reference" in values else operands[1:]
        case "tar" | "bsdtar" | "gtar":
            values, operands = split_options(
                args, "CfTXbIFL", ("--directory", "--file", "--files-from", "--exclude-from")
            )
            cluster = args[0] if args and not args[0].startswith("-") else ""
            extract = "x" in cluster or "-x" in values or "--extract" in values or "--get" in values
            create = (
                "c" in cluster or "-c" in values or "--create" in values or "-r" in values or "-u" in values
            )
            found = values.get("-C", []) + values.get("--directory", []) if extract else []
            if extract and ("P" in cluster or "-P" in values or "--absolute-names" in values):
                found.append("/")  # members keep their absolute paths: the archive writes where it likes
            if create:
                found += values.get("-f", []) + values.get("--file", [])
                if cluster and "f" in cluster and operands:
                    found.append(operands[0])
            return found
        case "unzip":
            return split_options(args, "dx")[0].get("-d", [])
        case "7z" | "7za" | "7zr":
            return [arg[2:] for arg in args if arg.startswith("-o") and len(arg) > 2]
        case "cpio" if any(
            a.startswith(("-i", "--extract")) or (a[:1] == "-" and "i" in a[1:2]) for a in args
        ):
            values, _ = split_options(args, "DEFHIMOR", ("--directory", "--file", "--format"))
            return values.get("-D", []) + values.get("--directory", [])
        case "awk" | "gawk" if any(args[i : i + 2] == ["-i", "inplace"] for i in range(len(args))):
            values, operands = split_options(args, "fvFiE", ("--file", "--assign", "--include"))
            return operands if values.get("-f") or values.get("--file") else operands[1:]
        case "split" | "csplit":
            _, operands = split_options(args, "abClnt", ("--suffix-length", "--bytes", "--lines", "--number"))
            return operands[1:2] if program == "split" else []
        case "curl":
            values, _ = split_options(
                args, "oKdHuXAeETFwmxy", ("--output", "--output-dir", "--config", "--data", "--header")
            )
            return values.get("-o", []) + values.get("--output", []) + values.get("--output-dir", [])
        case "wget":
            values, _ = split_options(
                args, "OPoa", ("--output-document", "--directory-prefix", "--output-file")
            )
            return [
                v for k in ("-O", "-P", "--output-document", "--directory-prefix") for v in values.get(k, [])
            ]
        case "sort":
            values, _ = split_options(args, "okt", ("--output",))
            return values.get("-o", []) + values.get("--output", [])
        case "vim" | "vi" | "nvim" | "nano" | "emacs" | "ed" | "ex" | "micro" | "pico" | "joe" | "mcedit":
            return [arg for arg in args if not arg.startswith(("-", "+"))]
        case "ssh-keygen":
            values, _ = split_options(args, "fbtCNFPZsInE")
            if values.keys() & {"-l", "-y", "-L", "-F", "-B", "-E"}:
                return []  # fingerprints, public keys, searches: reads only
            return values.get("-f", [])
        case "patch":
            values, operands = split_options(args, "pioDrdBFz", ("--input", "--output", "--directory"))
            return operands[:1] + values.get("-o", []) + values.get("-d", []) + values.get("--directory", [])
        case "git":
            if "apply" in args or "am" in args:
                if "--unsafe-paths" in args:
                    return ["/"]  # paths in the patch are taken as they are, anywhere
                return [a.partition("=")[2] for a in args if a.startswith("--directory=")]
            if "init" in args:
                values, operands = split_options(args, "C", ("--template", "--separate-git-dir"))
                rest = operands[operands.index("init") + 1 :] if "init" in operands else []
                return values.get("-C", [])[:1] + rest[:1] + values.get("--separate-git-dir", [])
            if "clone" in args:
                rest = args[args.index("clone") + 1 :]
                _, operands = split_options(
                    rest,
                    "obcujl",
                    (
                        "--origin",
                        "--branch",
                        "--config",
                        "--depth",
                        "--template",
                        "--reference",
                        "--separate-git-dir",
                    ),
                )
                return operands[1:2]
            return []
        case "find":
            if "-delete" in args or any(
                args[i] in ("-exec", "-execdir", "-ok", "-okdir")
                and posixpath.basename(args[i + 1]) in ("rm", "shred", "unlink", "rmdir", "mv")
                for i in range(len(args) - 1)
            ):
                return _find_starts(args)
            return []
        case "pip" | "pip3" | "uv" | "npm" | "pnpm" | "yarn" | "cargo" | "gem":
            values, _ = split_options(
                args, "t", ("--target", "--prefix", "--root", "--install-dir", "--bindir")
            )
            return [
                v
                for k in ("-t", "--target", "--prefix", "--root", "--install-dir", "--bindir")
                for v in values.get(k, [])
            ]
        case "ssh" | "scp" | "sftp" | "mount" | "autossh" | "sshfs":
            return []
        case _:  # most programs name their output file with -o/--output
            outputs: list[str] = []
            for i, arg in enumerate(args):
                if arg in ("-o", "--output", "--output-file", "--outfile", "--out") and i + 1 < len(args):
                    outputs.append(args[i + 1])
                elif arg.startswith(("--output=", "--output-file=", "--outfile=", "--out=")):
                    outputs.append(arg.partition("=")[2])
            return outputs


def _find_starts(args: Sequence[str]) -> list[str]:
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P") or args[i].startswith("-O")):
        i += 1
    starts: list[str] = []
    for arg in args[i:]:
        if arg.startswith(("-", "(", "!")) or arg == ")":
            break
        starts.append(arg)
    return starts or ["."]
