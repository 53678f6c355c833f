"""The environment of a command that runs under a prefix grant: git in it starts
no program that its configuration names.

A prefix grant covers what the user was shown (`git status`), but git reads configuration that the
model may have written or that came with the workspace: `core.fsmonitor`, hooks, an external
diff, a textconv or filter driver, a signature program, a transport. Every such key is turned off
for git commands run under a prefix grant:

- the keys with a fixed name through git's own configuration environment (`GIT_CONFIG_COUNT`,
  `GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`), which takes precedence over every configuration file;
- `safe.bareRepository=explicit`: a folder holding `HEAD`, `config`, `objects/` and `refs/` is
  never taken as a git directory by discovery, so files the model wrote cannot become one;
- remote transports refused (`GIT_ALLOW_PROTOCOL` empty), so no ssh, helper or `ext::` command
  (a lazy fetch included) starts;
- the drivers, whose keys are named by the repository (`diff.NAME.command`, `filter.NAME.clean`,
  ...): the command's shell gets a `git` function that lists those keys in the directory git runs
  in (`git config --get-regexp`) and turns each off for that one git process. A git command
  whose file needs a driver then fails; it never runs the driver;
- submodules are not looked into (`diff.ignoreSubmodules=all`): each is a repository of its own,
  whose drivers the listing above does not see.
"""

from __future__ import annotations

# Keys naming a program, or choosing to run one, with a fixed name: each gets a value that starts
# none (or git's own default program, never one from the configuration).
NEUTRAL_KEYS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "ssh"),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("diff.external", ""),
    ("diff.guitool", ""),
    ("diff.tool", ""),
    ("merge.tool", ""),
    ("credential.helper", ""),
    ("gpg.program", "gpg"),
    ("gpg.openpgp.program", "gpg"),
    ("gpg.x509.program", "gpgsm"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("log.showSignature", "false"),
    ("uploadpack.packObjectsHook", ""),
    ("protocol.allow", "never"),
    ("safe.bareRepository", "explicit"),
    # A submodule is another repository, with configuration of its own that the listing of
    # drivers does not see: not looked into (its changes are not shown).
    ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"),
)

# Keys whose middle part the repository names: a diff, filter or merge driver's program.
DRIVER_KEYS = r"^(diff|filter|merge)\..+\.(command|textconv|clean|smudge|process|driver)$"

# A bash function (exported to the command's shell as `BASH_FUNC_git%%`) standing for git in a
# granted command: it turns off every driver key of the repository it runs in, then runs git.
_GIT_FUNCTION = (
    "() {\n"
    "  local key n=${GIT_CONFIG_COUNT:-0}\n"
    "  local -a off=()\n"
    "  while IFS= read -r key; do\n"
    '    off+=("GIT_CONFIG_KEY_$n=$key" "GIT_CONFIG_VALUE_$n=")\n'
    "    n=$((n + 1))\n"
    "  done < <(command git config --includes --name-only --get-regexp "
    f"'{DRIVER_KEYS}' 2>/dev/null)\n"
    '  command env "${off[@]}" "GIT_CONFIG_COUNT=$n" git "$@"\n'
    "}"
)


def granted_env() -> dict[str, str]:
    """The variables a command run under a prefix grant gets on top of its usual environment."""
    env = {
        "GIT_CONFIG_COUNT": str(len(NEUTRAL_KEYS)),
        "GIT_ALLOW_PROTOCOL": "",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": ":",
        "GIT_SEQUENCE_EDITOR": ":",
        "GIT_TERMINAL_PROMPT": "0",
        "BASH_FUNC_git%%": _GIT_FUNCTION,
    }
    for i, (key, value) in enumerate(NEUTRAL_KEYS):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env
