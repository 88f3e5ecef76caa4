#!/usr/bin/env bash
# Build the HeteroSim image with buildah (no Docker daemon, no registry) and run the default
# experiment in it, with its results written to a host folder, then check them on the host.
#
#   docker/build-and-smoke.sh                  # from the repository root; needs root, buildah, mmdebstrap
#   HETEROSIM_IMAGE=heterosim:ray BUILD_ARGS="--build-arg WITH_RAY=1" docker/build-and-smoke.sh
#   BASE_IMAGE=docker.io/library/debian:bookworm-slim docker/build-and-smoke.sh   # a registry is reachable
#
# When BASE_IMAGE is not in local storage it is made from Debian packages with mmdebstrap (the
# same minimal Debian 12 that debian:bookworm-slim holds). Every step prints its wall time.
# Environment: STORAGE_DRIVER (vfs), ISOLATION (chroot), RESULTS (a host folder, default
# ./docker/results/smoke), EXPERIMENT (workloads/default.yaml), BUILD_ARGS (extra `buildah bud`
# options, e.g. "--build-arg PIP_INDEX_URL=https://mirror/simple"), CA_BUNDLE_FILE (PEM file of
# extra CA certificates for a TLS-intercepting proxy, passed as the CA_BUNDLE build argument; it
# is public certificate text and stays visible in the image history).
set -euo pipefail

cd "$(dirname "$0")/.."
IMAGE=${HETEROSIM_IMAGE:-heterosim:latest}
BASE_IMAGE=${BASE_IMAGE:-localhost/heterosim-base/debian:bookworm-slim}
STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
ISOLATION=${ISOLATION:-chroot}
RESULTS=${RESULTS:-$PWD/docker/results/smoke}
EXPERIMENT=${EXPERIMENT:-workloads/default.yaml}
BUILDAH=(buildah --storage-driver "$STORAGE_DRIVER")

step() { printf '\n== %s\n' "$*" >&2; STEP_START=$(date +%s); }
took() { printf '== done in %d s\n' "$(( $(date +%s) - STEP_START ))" >&2; }

if ! "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
    case "$BASE_IMAGE" in
    localhost/*)
        step "base image $BASE_IMAGE from Debian packages (mmdebstrap --variant=minbase bookworm)"
        tarball=$(mktemp --suffix=.tar)
        trap 'rm -f "$tarball"' EXIT
        mmdebstrap --quiet --variant=minbase --format=tar bookworm "$tarball"
        container=$("${BUILDAH[@]}" from scratch)
        "${BUILDAH[@]}" add "$container" "$tarball" /
        "${BUILDAH[@]}" config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            --label org.opencontainers.image.description="Debian 12 minbase (mmdebstrap)" "$container"
        "${BUILDAH[@]}" commit --quiet --rm "$container" "$BASE_IMAGE" >/dev/null
        took
        ;;
    *)
        step "pull $BASE_IMAGE"
        "${BUILDAH[@]}" pull "$BASE_IMAGE"
        took
        ;;
    esac
fi

ca_args=()
if [ -n "${CA_BUNDLE_FILE:-}" ]; then
    ca_args=(--build-arg "CA_BUNDLE=$(cat "$CA_BUNDLE_FILE")")
fi
step "buildah bud -f docker/Dockerfile -t $IMAGE (base $BASE_IMAGE)"
# shellcheck disable=SC2086
"${BUILDAH[@]}" bud --isolation "$ISOLATION" --layers --build-arg BASE_IMAGE="$BASE_IMAGE" \
    "${ca_args[@]}" ${BUILD_ARGS:-} -f docker/Dockerfile -t "$IMAGE" .
took
"${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$IMAGE" >&2

step "run $EXPERIMENT in $IMAGE, results to $RESULTS"
rm -rf "$RESULTS/default"
mkdir -p "$RESULTS"
container=$("${BUILDAH[@]}" from "$IMAGE")
status=0
"${BUILDAH[@]}" run --isolation "$ISOLATION" -v "$RESULTS:/results" "$container" -- \
    heterosim run "$EXPERIMENT" --out /results/default || status=$?
"${BUILDAH[@]}" rm "$container" >/dev/null
took
[ "$status" -eq 0 ] || { echo "heterosim run failed in the container (exit $status)" >&2; exit "$status"; }

step "check $RESULTS/default/results.json on the host"
python3 - "$RESULTS/default/results.json" <<'EOF'
import json, sys
results = json.load(open(sys.argv[1]))
assert results["iteration_time_s"] > 0, results["iteration_time_s"]
assert results["network"]["flows"] > 0 and results["sim"]["events"] > 0
print(f"results.json on the host: iteration {results['iteration_time_s'] * 1e3:.3f} ms, "
      f"{results['network']['flows']} flows, {results['sim']['events']} events, "
      f"sim wall {results['sim']['wall_s']:.1f} s, fidelity {results['sim']['fidelity']}")
EOF
ls "$RESULTS/default" >&2
took
