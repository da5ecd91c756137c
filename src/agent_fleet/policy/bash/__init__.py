"""Reading bash: shell text (or an argv) -> the simple commands it would run. Decides nothing.

Job: parse the text once on a real bash grammar (tree-sitter-bash), walk every node, expand words the
way bash would where that is known statically, peel transparent wrappers, and follow whatever a command
runs in turn (inline scripts, here-documents fed to shells, programs' own command options, code of other
languages given inline, files written and then run).

Contract:

* in: ``str`` (a shell text) or a sequence of words (an argv; ``bash -lc SCRIPT`` is unwrapped);
* out: a ``ParsedScript`` (``_commands``): every ``SimpleCommand`` in execution order, the script's
  redirections, and ``opaque``, the reasons some code cannot be seen; no verdicts (the rules decide);
* raises ``UnparsableCommand`` for text that is not valid shell or nests too deeply, and
  ``CommandTooLarge`` (a subclass) when a script runs more than the walker judges; callers fail closed;
* pure and thread-safe (one tree-sitter ``Parser`` per thread), linear work in the input.

Modules: ``_shell`` (entry points ``parse_script``/``parse_command``; theory of operation; the work bounds
``MAX_COMMANDS``, ``MAX_PARSES``, ``MAX_PIPES``), ``_walker`` (the tree walk, ``MAX_NESTING``), ``_state``
(where a command sits and what the walk found), ``_words`` (expansion: quotes, variables, arrays, ``IFS``,
``printf %b``), ``_unwrap`` (argv-level knowledge of wrappers and of programs that run scripts), ``_runs``
(programs that run a command given in their arguments), ``_git`` (what git and environment variables
run), ``_escapes`` (programs whose own language runs shell commands: ``ed``, ``dc``, ``m4`` ...),
``_later`` (files written or edited with known text and then run; makefiles), ``_code``,
``_python`` and ``_code_patterns`` (inline code of other languages), ``_commands`` (the values).

May use: nothing else of the policy (it is the bottom layer).
"""
