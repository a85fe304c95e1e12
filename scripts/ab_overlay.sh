#!/usr/bin/env bash
# Writes ab/<name>/: the files of git ref <ref> that differ from the working tree
# under src, include, tests, bench and CMake files (or only the paths given), for a
# same-run A/B on the device (scripts/device_ab_overlay.sh builds it there; the
# ab/ folder is ignored by git, so pass it in the device call's carry list).
#   scripts/ab_overlay.sh main main                  # this tree against main
#   scripts/ab_overlay.sh prev HEAD~1 src/cuda/sm90  # one folder of the last commit
# Files the working tree has and <ref> lacks cannot be removed by an overlay: they
# are listed, and the build must not depend on them.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
name=$1 ref=$2
shift 2
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(src include tests bench CMakeLists.txt cmake ':(exclude)bench/results')
cd "$(git rev-parse --show-toplevel)"
rm -rf "ab/$name"
mkdir -p "ab/$name"
count=0
# Against the ref, the working tree's files are M(odified), A(dded: not in the ref)
# or D(eleted: only in the ref); the overlay takes the ref's version of M and D.
while IFS=$'\t' read -r status path; do
  case $status in
    A) echo "only in the working tree (stays in the overlay build): $path" ;;
    *) mkdir -p "ab/$name/$(dirname "$path")"
       git show "$ref:$path" >"ab/$name/$path"
       count=$((count + 1)) ;;
  esac
done < <(git diff --name-status --no-renames "$ref" -- "${paths[@]}")
echo "ab/$name: $count files from $ref"
