# The rootfs stage of yip, as far as the Elemental initrd depends on it (sourced by the test OS
# initramfs; POSIX sh, busybox ash). Elemental runs `elemental run-stage rootfs` in the initrd
# before it mounts the layout (rancher/elemental-toolkit elemental-setup-rootfs.service); the
# stage entries' `environment` land in their `environment_file`, /run/cos/cos-layout.env, which
# the layout mount then reads. Here the same happens for the environment part: the stages
# rootfs.before, rootfs and rootfs.after in that order, each over the cloud-init directories in
# order (/system/oem, /oem, /usr/local/cloud-config) and their *.yaml/*.yml files sorted by name;
# an entry runs when its `if` succeeds under sh; its variables are merged into its file (a later
# entry replaces a variable an earlier one set). Other kinds of entries (commands, files, ...) are
# reported and not run. A file that cannot be read is skipped whole, with a message.
#
# Needs: yip_log MESSAGE (provided by the caller), awk, and YIP_AWK (the parser, yip-stage.awk).
# YIP_ROOT prefixes every environment_file (empty in the initramfs).

yip_entry() { yip_name=$1; yip_cond=; yip_file=; yip_vars=; yip_skips=; }
yip_if() { yip_cond=$1; }
yip_envfile() { yip_file=$1; }
yip_env() {
  # KEY VALUE, kept as one quoted assignment per line for yip_end
  case "$1" in
    *[!A-Za-z0-9_]* | [0-9]* | '') yip_log "yip: $yip_src: entry '$yip_name': '$1' is not a variable name; ignored"; return ;;
  esac
  yip_vars="$yip_vars$1=$(yip_quote "$2")
"
}
yip_skip() { yip_skips="$yip_skips $1"; }
yip_error() { yip_log "yip: $1; file skipped"; }

# Double-quoted, with \ " $ ` escaped, so sh and systemd's EnvironmentFile= read it back; one
# line per variable, so a line break in a value becomes a space (the layout's values are lists
# separated by white space, which a block scalar often spreads over lines).
yip_quote() {
  printf '"%s"' "$(printf '%s' "$1" | tr '\n' ' ' | sed -e 's/[\\"$`]/\\&/g')"
}

yip_end() {
  if [ -n "$yip_skips" ]; then yip_log "yip: $yip_src: entry '$yip_name': not run here:$yip_skips"; fi
  if [ -n "$yip_cond" ] && ! sh -c "$yip_cond" > /dev/null 2>&1; then
    yip_log "yip: $yip_src: entry '$yip_name': skipped, if: $yip_cond"
    return
  fi
  [ -n "$yip_vars" ] || return 0
  if [ -z "$yip_file" ]; then
    yip_log "yip: $yip_src: entry '$yip_name': environment without environment_file; ignored"
    return
  fi
  yip_merge "$YIP_ROOT$yip_file" "$yip_vars"
  yip_log "yip: $yip_src: entry '$yip_name': $(printf '%s' "$yip_vars" | sed -n 's/=.*//p' | tr '\n' ' ')-> $yip_file"
}

# Merges KEY="value" lines into FILE: each key replaces its earlier line. Written to a temp file
# and renamed, so a reader never sees half a file.
yip_merge() {
  mkdir -p "$(dirname "$1")"
  yip_tmp="$1.tmp.$$"
  : > "$yip_tmp"
  if [ -f "$1" ]; then
    while IFS= read -r yip_line; do
      yip_key=${yip_line%%=*}
      case "$2" in
        "$yip_key="* | *"
$yip_key="*) ;;
        *) printf '%s\n' "$yip_line" >> "$yip_tmp" ;;
      esac
    done < "$1"
  fi
  printf '%s' "$2" >> "$yip_tmp"
  mv -f "$yip_tmp" "$1"
}

# yip_run_stage STAGE DIR... : the stage over the directories, in order.
yip_run_stage() {
  yip_stage=$1
  shift
  for yip_phase in "$yip_stage.before" "$yip_stage" "$yip_stage.after"; do
    for yip_dir in "$@"; do
      [ -d "$yip_dir" ] || continue
      # a glob expands sorted by name, as yip walks a directory
      for yip_src in "$yip_dir"/*; do
        case "$yip_src" in *.yaml | *.yml) ;; *) continue ;; esac
        [ -f "$yip_src" ] || continue
        yip_out=$(awk -v stage="$yip_phase" -v file="$yip_src" -f "$YIP_AWK" "$yip_src")
        yip_rc=$?
        if [ $yip_rc -ne 0 ] && [ $yip_rc -ne 2 ]; then
          yip_log "yip: $yip_src: the parser failed (exit $yip_rc); file skipped"
          continue
        fi
        eval "$yip_out"
      done
    done
  done
}
