# Sourced by docker/build-images.sh, docker/base/build-base.sh and the image tests: podman and
# buildah read the project's own configuration (this folder), never /etc/containers' edits, and
# keep their images in a storage of the project's own, outside the repository:
#     ${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/images/   (BACKSCROLL_IMAGE_CACHE)
#         base-bookworm-<key>.tar   the Debian rootfs (docker/base/build-base.sh)
#         storage/                  images and build layers (containers/storage, overlay)
#         storage.conf              rendered from storage.conf.in
# The storage driver is overlay where the kernel mounts it, vfs otherwise (BACKSCROLL_STORAGE_DRIVER).
_containers_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export BACKSCROLL_IMAGE_CACHE="${BACKSCROLL_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/images}"
mkdir -p "$BACKSCROLL_IMAGE_CACHE/storage" "$BACKSCROLL_IMAGE_CACHE/run"
if [[ -z "${BACKSCROLL_STORAGE_DRIVER:-}" ]]; then
  if grep -qw overlay /proc/filesystems 2>/dev/null || modprobe -q overlay 2>/dev/null; then
    BACKSCROLL_STORAGE_DRIVER=overlay
  else
    BACKSCROLL_STORAGE_DRIVER=vfs
  fi
fi
export BACKSCROLL_STORAGE_DRIVER
_storage_conf="$BACKSCROLL_IMAGE_CACHE/storage.conf"
_rendered="$(sed -e "s|@GRAPHROOT@|$BACKSCROLL_IMAGE_CACHE/storage|" \
                 -e "s|@RUNROOT@|$BACKSCROLL_IMAGE_CACHE/run|" \
                 -e "s|@DRIVER@|$BACKSCROLL_STORAGE_DRIVER|" "$_containers_dir/storage.conf.in")"
if [[ ! -f "$_storage_conf" || "$(cat "$_storage_conf")" != "$_rendered" ]]; then
  printf '%s\n' "$_rendered" > "$_storage_conf"
fi
export CONTAINERS_STORAGE_CONF="$_storage_conf"
export CONTAINERS_CONF="$_containers_dir/containers.conf"
export CONTAINERS_REGISTRIES_CONF="$_containers_dir/registries.conf"
unset _containers_dir _storage_conf _rendered
