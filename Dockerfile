# The minihpc node image: one image for every node role; docker-compose.yml picks the role
# with `command:` (`node master-node --master ...` or `node worker-node-1`). `make build`
# (scripts/build-images.sh) builds it in three layers, each rebuilt only when its inputs change:
#
#   scripts/images/node-base.Dockerfile  users, folders, an empty venv, command wrappers,
#                                        environment and entrypoint, on Debian or python:3.11
#   minihpc/node-deps:<stamp>            + the Python packages of requirements.txt, taken from
#                                        the project's venv (scripts/images/venv_layer.py) or
#                                        installed by pip (scripts/images/node-deps.Dockerfile)
#   this file                            + minihpc's source tree
#
# The build context is not the repository but build/node-src/: src/ and jobs/ with their
# bytecode compiled by the image's own Python (root owns it, so neither daemons nor jobs could
# write __pycache__, and every job's processes would otherwise compile these modules again on
# every start). A change in src/ rebuilds this one step.
ARG DEPS_IMAGE=minihpc/node-deps
FROM ${DEPS_IMAGE}
COPY . /opt/minihpc/
