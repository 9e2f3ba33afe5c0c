# shellcheck shell=bash
# The prebuilt GPU bundle's run-time environment (docs/building.md, "GPU check"). Sourced by
# scripts/gpu_bundle.sh (which checks a bundle as it makes it) and scripts/gpu_check.sh (which runs
# one): the binaries find the bundle's own libraries, then the torch wheel's and its nvidia-* wheels'
# of the python given, and nothing else but the base system's.

# Libraries every glibc Linux has (Ubuntu 24.04 at least as new as Debian 12's, which the bundle is
# built on): anything else a binary loads from the system's directories must be in the bundle.
GPU_BUNDLE_BASE_LIBS="linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0
libstdc++.so.6 libgcc_s.so.1 libz.so.1 libutil.so.1 libresolv.so.2"
# Provided by the GPU machine's driver, never by a wheel or the bundle.
GPU_BUNDLE_DRIVER_LIBS="libcuda.so.1 libnvidia-ml.so.1"

# The bundle's binaries, in the order the GPU check runs them.
GPU_BUNDLE_BINARIES="attnlab test_gpu bench_attention"

# Where build directory $1 puts program $2: the test executables under tests/, the others at its top.
gpu_bundle_built() {
  case $2 in test_*) echo "$1/tests/$2" ;; *) echo "$1/$2" ;; esac
}

# Prints, for python $1, torch's version on the first line and on the second its library directory
# then the lib directories of its nvidia-* wheels, ':'-separated (one import of torch for both).
gpu_bundle_torch_info() {
  "$1" - <<'EOF'
import glob, os
import torch
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs += sorted(d for d in glob.glob(os.path.join(site, "nvidia", "**", "lib"), recursive=True) if os.path.isdir(d))
print(torch.__version__)
print(":".join(dirs))
EOF
}

# Checks every binary of bundle $1 in a clean environment (env -i) whose LD_LIBRARY_PATH is $1/lib
# then $2: every library must resolve, from the bundle, from a directory of $2, or (for the base
# libraries above) from the system; a driver library may be missing here. Prints one line per binary
# and the offenders; returns 1 if any.
gpu_bundle_check_libraries() {
  local bundle=$1 torch_path=$2 bin line lib path bad=0 allowed dir
  for bin in $GPU_BUNDLE_BINARIES; do
    local n=0 problems=""
    while read -r line; do
      lib=$(awk '{print $1}' <<<"$line")
      path=$(awk '$2 == "=>" {print $3} $2 != "=>" {print $1}' <<<"$line")
      [ -n "$lib" ] || continue
      n=$((n + 1))
      case " $GPU_BUNDLE_DRIVER_LIBS " in *" $lib "*) continue ;; esac
      if [ "$path" = "not" ] || [ "$path" = "" ]; then
        problems+=" $lib (not found)"
        continue
      fi
      allowed=0
      for dir in "$bundle/lib" ${torch_path//:/ }; do
        case "$path" in "$dir"/*) allowed=1 ;; esac
      done
      case " ${GPU_BUNDLE_BASE_LIBS//$'\n'/ } " in *" $(basename "$lib") "*)
        case "$path" in /lib/* | /lib64/* | /usr/lib/* | /usr/lib64/* | linux-vdso*) allowed=1 ;; esac ;;
      esac
      [ "$lib" = "linux-vdso.so.1" ] && allowed=1
      [ $allowed = 1 ] || problems+=" $lib ($path)"
    done < <(env -i LD_LIBRARY_PATH="$bundle/lib:$torch_path" ldd "$bundle/bin/$bin" 2>&1)
    if [ -n "$problems" ]; then
      echo "$bin: $n libraries; not from the bundle, torch or the base system:$problems"
      bad=1
    else
      echo "$bin: $n libraries, each from the bundle, torch's wheels or the base system"
    fi
  done
  return $bad
}

# The newest GLIBC_ and GLIBCXX_ symbol versions the bundle's files need (the device's glibc and
# libstdc++ must be at least these).
gpu_bundle_symbol_versions() {
  local bundle=$1
  objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null |
    grep -oE 'GLIBC(XX)?_[0-9]+(\.[0-9]+)+' | sort -u -V |
    awk -F_ '{v[$1] = $0} END {print v["GLIBC"], v["GLIBCXX"]}'
}
