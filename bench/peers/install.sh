#!/bin/sh
# Makes the peers' virtualenv: bench/.venv-peers, or $LOOPWRIGHT_PEERS_VENV. The peers never go
# into the project's environment and the test suite never needs them.
#   sh bench/peers/install.sh            # then: python bench/run.py --peers
#   PYTHON=python3.11 LOOPWRIGHT_PEERS_VENV=/tmp/peers sh bench/peers/install.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${LOOPWRIGHT_PEERS_VENV:-$(cd "$here/.." && pwd)/.venv-peers}
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
"$venv/bin/python" -c 'import langgraph, smolagents, pydantic_ai, agents, langgraph_api'
echo "peers installed in $venv"
