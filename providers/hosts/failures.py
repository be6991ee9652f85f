"""The runtime failure catalogue of HostConvergence (HST0xx): docs/host-roles.md lists each code with its
meaning and fix (a test checks they agree); `environments.coded` writes the line."""

from __future__ import annotations

from enum import unique

from environments.coded import FailureCode


@unique
class HostFail(FailureCode):
    ROLE_RULES = ("HST001", "the inventory breaks the environment's host role rules (listed below the line)",
                  "fix each finding in the environment; nothing ran on a host")
    UNKNOWN_MACHINE_HOST = ("HST002", "a machine identity is given for a host the inventory lacks",
                            "declare the host, or drop its machine")
    CONVERGENCE_FAILED = ("HST003", "the playbook failed or a host was unreachable (each host's failed task below)",
                          "fix what the failed task names (or reach the host), then run up again")
    VAULT = ("HST004", "a secret the hosts need (SSH key, role secret, runner token) could not be read from Vault",
             "the message names the address, path and cause; fill or grant it, then run up again")
    NO_VAULT = ("HST005", "the resource was given no Vault settings (input 'vault')",
                "declare the environment's vault settings (components/host_roles.py passes them)")
    ANSIBLE_WORKER = ("HST006", "the ansible worker could not run the playbook (it crashed, or ansible-runner "
                      "raised)", "its stderr, shown above the line, says why; fix that, then run up again")
