# Reads one yip file (YAML, rancher/yip pkg/schema/schema.go) and prints the entries of one stage
# (-v stage=rootfs) as shell calls for the test OS initramfs (yip-rootfs.sh defines them):
#   yip_entry NAME; yip_if COND; yip_envfile PATH; yip_env KEY VALUE; yip_skip FIELD; yip_end
# every argument single-quoted. On input it cannot read it prints `yip_error MESSAGE` only and
# exits 2, so a broken file is skipped as a whole, as yip skips a file it cannot parse.
#
# YAML handled: block mappings and sequences (also the compact form, a sequence at its key's
# indentation), plain, single- and double-quoted scalars (also folded over lines), block scalars
# (| and >, with chomping and indentation indicators), comments, one document. Flow collections,
# anchors, aliases and tags are refused where this program needs the value, skipped elsewhere.
# Busybox awk: no gensub, no gawk extensions.

function q(s,    out, k) {
  out = ""
  while ((k = index(s, "'")) > 0) {
    out = out substr(s, 1, k - 1) "'\"'\"'"
    s = substr(s, k + 1)
  }
  return "'" out s "'"
}

function fail(lineno, msg) {
  if (!failed) {
    failed = 1
    errmsg = file ":" lineno ": " msg
  }
}

function indent_of(s) {
  return match(s, /[^ ]/) ? RSTART - 1 : length(s)
}

function is_blank(s) {
  return s ~ /^[ ]*$/ || s ~ /^[ ]*#/
}

function push(ind, kind, key) {
  depth++
  sind[depth] = ind
  skind[depth] = kind
  skey[depth] = key
  sidx[depth] = 0
}

# The path of the node on top of the stack: keys joined by "/", sequence items as [n].
function path(    p, d) {
  p = ""
  for (d = 1; d <= depth; d++) p = p (d > 1 ? "/" : "") (skind[d] == "seq" ? "[" sidx[d] "]" : skey[d])
  return p
}

# What this program needs from a path: "" (nothing), "entry" (a field of a stage entry: its
# name, if, environment_file, or an unsupported field), "env" (an environment variable).
function wanted(p,    rest) {
  if (index(p, "stages/" stage "/[") != 1) return ""
  rest = substr(p, length("stages/" stage "/[") + 1)
  if (rest !~ /^[0-9]+\]\//) return ""
  sub(/^[0-9]+\]\//, "", rest)
  if (rest ~ /^environment\/[^\/]+$/) return "env"
  if (rest ~ /^[^\/]+$/) return "entry"
  return ""
}

function entry_index(p,    rest) {
  rest = substr(p, length("stages/" stage "/[") + 1)
  sub(/\].*/, "", rest)
  return rest + 0
}

function last_key(p) {
  sub(/.*\//, "", p)
  return p
}

# Splits "key: value" / "key:" (key plain or quoted) into KEY and VAL; 0 when not a mapping key.
function split_key(s,    k, c, rest) {
  KEY = ""; VAL = ""
  c = substr(s, 1, 1)
  if (c == "\"" || c == "'") {
    k = index(substr(s, 2), c)
    if (k == 0) return 0
    rest = substr(s, k + 2)
    if (rest !~ /^:( |$)/) return 0
    KEY = substr(s, 2, k - 1)
    VAL = substr(rest, 2)
  } else {
    if (index("[]{}#&*!|>%@`?,", c)) return 0
    if (match(s, /: /)) {
      KEY = substr(s, 1, RSTART - 1)
      VAL = substr(s, RSTART + 2)
    } else if (s ~ /:$/) {
      KEY = substr(s, 1, length(s) - 1)
    } else return 0
    sub(/[ ]+$/, "", KEY)
  }
  sub(/^[ ]+/, "", VAL)
  return 1
}

function strip_comment(s) {
  sub(/(^| )#.*$/, "", s)
  sub(/[ ]+$/, "", s)
  return s
}

# Folds the lines of a multi-line flow scalar: line breaks become spaces, empty lines newlines.
function fold_line(acc, s) {
  sub(/^[ ]+/, "", s)
  sub(/[ ]+$/, "", s)
  if (s == "") return acc "\n"
  if (acc == "" || acc ~ /\n$/) return acc s
  return acc " " s
}

function unescape_double(s, lineno,    out, c, k) {
  out = ""
  while ((k = index(s, "\\")) > 0) {
    out = out substr(s, 1, k - 1)
    c = substr(s, k + 1, 1)
    if (c == "n") out = out "\n"
    else if (c == "t") out = out "\t"
    else if (c == "\\" || c == "\"" || c == "/" || c == " ") out = out c
    else if (c == "0") out = out ""
    else { fail(lineno, "unsupported escape \\" c " in a double-quoted string"); return "" }
    s = substr(s, k + 2)
  }
  return out s
}

# A quoted scalar starting at VAL on line i, possibly continued on more-indented lines.
# Sets SCALAR and returns the index of its last line.
function quoted(i, val, lineno,    c, acc, body, k, done, tmp, rest, j) {
  c = substr(val, 1, 1)
  body = substr(val, 2)
  acc = ""
  for (;;) {
    if (c == "'") {
      # '' is an escaped quote; the first lone ' closes
      done = 0
      tmp = ""
      while ((k = index(body, "'")) > 0) {
        if (substr(body, k + 1, 1) == "'") { tmp = tmp substr(body, 1, k); body = substr(body, k + 2); continue }
        tmp = tmp substr(body, 1, k - 1)
        rest = substr(body, k + 1)
        done = 1
        break
      }
      if (!done) tmp = tmp body
    } else {
      done = 0
      tmp = ""
      while ((k = index(body, "\"")) > 0) {
        # count the backslashes before the quote
        j = k - 1
        while (j > 0 && substr(body, j, 1) == "\\") j--
        if ((k - 1 - j) % 2 == 1) { tmp = tmp substr(body, 1, k); body = substr(body, k + 1); continue }
        tmp = tmp substr(body, 1, k - 1)
        rest = substr(body, k + 1)
        done = 1
        break
      }
      if (!done) tmp = tmp body
    }
    acc = (acc == "" ? tmp : fold_line(acc, tmp))
    if (done) break
    i++
    if (i > n) { fail(lineno, "unterminated quoted string"); SCALAR = ""; return n }
    body = L[i]
  }
  if (strip_comment(rest) != "") fail(lineno, "unexpected text after a quoted string: " rest)
  SCALAR = (c == "\"") ? unescape_double(acc, lineno) : acc
  return i
}

# A block scalar (| or >) whose header is HDR, for a node at indentation IND; content from line i+1.
function block(i, hdr, ind, lineno,    style, chomp, explicit, cind, j, s, lines, m, out, k, more, prevmore, c, last, trail) {
  style = substr(hdr, 1, 1)
  hdr = strip_comment(substr(hdr, 2))
  chomp = "clip"; explicit = 0
  while (hdr != "") {
    c = substr(hdr, 1, 1)
    if (c == "-") chomp = "strip"
    else if (c == "+") chomp = "keep"
    else if (c ~ /[1-9]/) explicit = c + 0
    else { fail(lineno, "bad block scalar header " style hdr); SCALAR = ""; return i }
    hdr = substr(hdr, 2)
  }
  cind = explicit ? ind + explicit : -1
  m = 0
  for (j = i + 1; j <= n; j++) {
    s = L[j]
    if (s ~ /^[ ]*$/) { lines[++m] = ""; continue }
    k = indent_of(s)
    if (cind < 0) {
      if (k <= ind) break
      cind = k
    }
    if (k < cind) break
    lines[++m] = substr(s, cind + 1)
  }
  last = j - 1
  # trailing empty lines belong to the scalar only with keep chomping
  trail = 0
  while (m > 0 && lines[m] == "") { m--; trail++ }
  out = ""
  prevmore = 0
  for (k = 1; k <= m; k++) {
    if (style == "|") { out = out lines[k] "\n"; continue }
    more = lines[k] ~ /^[ \t]/
    if (lines[k] == "") out = out "\n"
    else if (k == 1 || out ~ /\n$/ || more || prevmore) out = out (k > 1 && out !~ /\n$/ ? "\n" : "") lines[k]
    else out = out " " lines[k]
    prevmore = more
  }
  if (style == ">" && m > 0) out = out "\n"
  if (chomp == "strip") sub(/\n+$/, "", out)
  else if (chomp == "keep") { for (k = 0; k < trail; k++) out = out "\n" }
  SCALAR = out
  # lines of the block that were blank still belong to it
  return last
}

# A plain scalar starting with VAL on line i, continued on lines indented more than IND.
function plain(i, val, ind,    acc, j, s) {
  acc = strip_comment(val)
  for (j = i + 1; j <= n; j++) {
    s = L[j]
    if (s ~ /^[ ]*$/) { acc = acc "\n"; continue }
    if (indent_of(s) <= ind || s ~ /^[ ]*#/) break
    acc = fold_line(acc, strip_comment(s))
  }
  sub(/\n+$/, "", acc)
  SCALAR = acc
  return j - 1
}

# Skips the lines nested under a node at indentation IND that this program does not need.
function skip_nested(i, ind,    j) {
  for (j = i + 1; j <= n; j++) {
    if (L[j] ~ /^[ ]*$/) continue
    if (indent_of(L[j]) <= ind) break
  }
  return j - 1
}

function record(p, kind, lineno, has_scalar,    e, f) {
  e = entry_index(p)
  if (!(e in seen)) { seen[e] = 1; order[++nentries] = e }
  if (kind == "env") {
    if (!has_scalar) { fail(lineno, "environment variable " last_key(p) " has no plain value"); return }
    nenv[e]++
    envk[e, nenv[e]] = last_key(p)
    envv[e, nenv[e]] = SCALAR
    return
  }
  f = last_key(p)
  if (f == "name" || f == "if" || f == "environment_file") {
    if (!has_scalar) { fail(lineno, f " is not a plain value"); return }
    field[e, f] = SCALAR
    hasfield[e, f] = 1
  } else if (f != "environment") {
    nskip[e]++
    skipf[e, nskip[e]] = f
  }
}

# The value after "key:" (or of a sequence item) at line i; IND is the indentation its
# continuation lines and block scalar content must exceed (the key's column, or the dash's).
# Returns the last line it used.
function value(i, val, ind, lineno,    p, w, c) {
  p = path()
  w = wanted(p)
  c = substr(val, 1, 1)
  if (val == "" || val ~ /^#/) {
    # a nested node follows; an environment block or an entry field that is a mapping or list
    if (w == "entry") record(p, "entry", lineno, 0)
    if (w == "env") { SCALAR = ""; record(p, "env", lineno, 1) }
    return i
  }
  if (w == "") {
    if (c == "|" || c == ">") return block(i, val, ind, lineno)
    if (c == "'" || c == "\"") return quoted(i, val, lineno)
    return skip_nested(i, ind)
  }
  if (w == "entry" && last_key(p) == "environment") { fail(lineno, "environment must be a block mapping"); return i }
  if (w == "entry" && last_key(p) !~ /^(name|if|environment_file)$/) {
    record(p, "entry", lineno, 0)
    if (c == "|" || c == ">") return block(i, val, ind, lineno)
    if (c == "'" || c == "\"") return quoted(i, val, lineno)
    return skip_nested(i, ind)
  }
  if (c == "[" || c == "{") { fail(lineno, "flow collections are not supported for " last_key(p)); return i }
  if (c == "&" || c == "*" || c == "!") { fail(lineno, "anchors, aliases and tags are not supported for " last_key(p)); return i }
  if (c == "|" || c == ">") i = block(i, val, ind, lineno)
  else if (c == "'" || c == "\"") i = quoted(i, val, lineno)
  else i = plain(i, val, ind)
  record(p, w, lineno, 1)
  return i
}

{ sub(/\r$/, ""); L[++n] = $0 }

END {
  depth = 0
  nentries = 0
  docs = 0
  content = 0
  for (i = 1; i <= n && !failed; i++) {
    line = L[i]
    if (is_blank(line)) continue
    if (line ~ /^(---|\.\.\.)([ ]|$)/) {
      if (line ~ /^---/ && content) fail(i, "more than one YAML document")
      continue
    }
    if (line ~ /^[ ]*\t/) { fail(i, "a tab in the indentation"); break }
    content = 1
    ind = indent_of(line)
    rest = substr(line, ind + 1)
    # sequence items, possibly several on one line ("- - a")
    while (rest ~ /^-([ ]|$)/) {
      while (depth > 0 && sind[depth] > ind) depth--
      if (depth > 0 && sind[depth] == ind && skind[depth] == "seq") sidx[depth]++
      else push(ind, "seq", "")
      rest = substr(rest, 2)
      k = indent_of(rest)
      ind = ind + 1 + k
      rest = substr(rest, k + 1)
    }
    if (rest == "" || rest ~ /^#/) continue
    if (split_key(rest)) {
      while (depth > 0 && sind[depth] >= ind) depth--
      push(ind, "key", KEY)
      i = value(i, VAL, ind, i)
    } else {
      # a scalar sequence item (or a stray line): only an error where an entry was expected
      if (wanted(path() "/x") != "" && skind[depth] == "seq") fail(i, "a stage entry must be a mapping")
      else if (skind[depth] != "seq") { fail(i, "cannot read this line: " rest); break }
      i = value(i, rest, sind[depth], i)
    }
  }
  if (failed) {
    print "yip_error " q(errmsg)
    exit 2
  }
  for (o = 1; o <= nentries; o++) {
    e = order[o]
    print "yip_entry " q(hasfield[e, "name"] ? field[e, "name"] : "")
    if (hasfield[e, "if"]) print "yip_if " q(field[e, "if"])
    if (hasfield[e, "environment_file"]) print "yip_envfile " q(field[e, "environment_file"])
    for (k = 1; k <= nenv[e]; k++) print "yip_env " q(envk[e, k]) " " q(envv[e, k])
    for (k = 1; k <= nskip[e]; k++) print "yip_skip " q(skipf[e, k])
    print "yip_end"
  }
}
