#!/usr/bin/env bash
# Installs the Python packages the tests drive fastpath with, pinned, into a virtual environment
# of the repository's own (target/python, or $FASTPATH_PYENV): p4runtime-shell, the P4Runtime
# shell of the P4 project, with the packages it needs (p4runtime: the compiled P4Runtime
# messages; grpcio; protobuf). crates/fastpath/tests/live_p4rt.rs and examples/p4rt_l2_learn.py
# run with its interpreter (target/python/bin/python).
#
# Idempotent: when the environment already holds exactly these versions nothing is installed.
# Needs python3 with the venv module (Debian: python3-venv, installed here when missing and root).
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir="${FASTPATH_PYENV:-target/python}"
# p4runtime-shell 0.0.6 and what it pulls in, as resolved on 2026-11-25 (Python 3.11).
pins=(
    p4runtime-shell==0.0.6 p4runtime==1.4.1 grpcio==1.85.3 protobuf==3.20.3 googleapis-common-protos==1.73.0
    ipython==7.31.1 jedi==0.17.2 parso==0.7.1 backcall==0.2.0 decorator==5.3.1 matplotlib-inline==0.2.2
    pexpect==4.9.0 pickleshare==0.7.5 prompt_toolkit==3.0.53 ptyprocess==0.7.0 Pygments==2.21.0
    traitlets==5.16.1 typing_extensions==4.16.0 wcwidth==0.9.4
)
stamp="$env_dir/.fastpath-pins"
want="$(printf '%s\n' "${pins[@]}")"
if [ -x "$env_dir/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup-python: $env_dir is up to date"
    exit 0
fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup-python: python3 has no venv module and we are not root (apt-get install python3-venv)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
echo "setup-python: installing p4runtime-shell and its dependencies into $env_dir"
python3 -m venv "$env_dir"
"$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${pins[@]}"
printf '%s\n' "$want" > "$stamp"
echo "setup-python: done ($("$env_dir/bin/python" -c 'import p4runtime_sh, grpc; print("grpcio", grpc.__version__)'))"
