/* The config reader of book/config_reader.md: `python -m posenc.describe config.json`, in the browser.
 *
 * A port of posenc.hf (fields.py, families.py, layers.py, reader.py, cli.py) and of the checks it
 * reaches in posenc.rope (scaling.py, longrope.py, nd.py), posenc.t5 and posenc._checks. Given the
 * bytes of a config.json it returns exactly the text the command prints: the per-layer table, or
 * "error: ..." with the message Python gives. Each section names the Python function it mirrors;
 * tests/site/test_config_reader.py compares the two on every configuration the book ships.
 *
 * Python's values are kept apart as Python keeps them: a JSON object is a Map (insertion order, as a
 * dict), an int a BigInt, a float a Number, null null. Nothing here reaches the network.
 */
(function (root) {
  "use strict";

  /** An exception of Python's: its type name and message (ValueError, TypeError, OverflowError). */
  class PyError extends Error {
    constructor(type, message) {
      super(message);
      this.type = type;
    }
  }
  const valueError = (message) => new PyError("ValueError", message);

  // ---------------------------------------------------------------------------------------------
  // Python's values: types, truth, repr and the formats the messages use
  // ---------------------------------------------------------------------------------------------

  const isInt = (v) => typeof v === "bigint"; // isinstance(v, int) and not a bool
  const isFloat = (v) => typeof v === "number";
  const isNumber = (v) => isInt(v) || isFloat(v); // isinstance(v, (int, float)), bools excluded
  const isDict = (v) => v instanceof Map;
  const isList = (v) => Array.isArray(v);
  const isStr = (v) => typeof v === "string";

  /** Python's truth value of a JSON value. */
  function truthy(v) {
    if (v === null || v === undefined || v === false) return false;
    if (isInt(v)) return v !== 0n;
    if (isFloat(v)) return v !== 0;
    if (isStr(v) || isList(v)) return v.length > 0;
    if (isDict(v)) return v.size > 0;
    return true;
  }

  /** float(v) of an int or float: OverflowError for an int beyond the largest float. */
  function toFloat(v) {
    if (isFloat(v)) return v;
    if (typeof v === "boolean") return v ? 1 : 0;
    const x = Number(v);
    if (!Number.isFinite(x)) throw new PyError("OverflowError", "int too large to convert to float");
    return x;
  }

  /** math.isfinite(v): True for every int that converts to a float. */
  const isFinite = (v) => (isInt(v) ? Number.isFinite(toFloat(v)) : Number.isFinite(v));

  /** a < b, a <= b, ... between ints and floats, exactly as Python compares them. */
  function compare(a, b) {
    if (typeof a === "boolean") a = a ? 1n : 0n;
    if (typeof b === "boolean") b = b ? 1n : 0n;
    if (isInt(a) && isInt(b)) return a < b ? -1 : a > b ? 1 : 0;
    if (isFloat(a) && isFloat(b)) return a < b ? -1 : a > b ? 1 : a === b ? 0 : NaN;
    return a < b ? -1 : a > b ? 1 : a == b ? 0 : NaN; // mixed: JavaScript compares a BigInt and a Number exactly
  }
  const lt = (a, b) => compare(a, b) < 0;
  const le = (a, b) => compare(a, b) <= 0;
  const eq = (a, b) => compare(a, b) === 0;

  /** int / int (true division), as a float; OverflowError if the quotient exceeds the largest float. */
  function trueDiv(a, b) {
    const q = Number(a) / Number(b);
    if (!Number.isFinite(q)) throw new PyError("OverflowError", "integer division result too large for a float");
    return q;
  }

  /** math.log: ValueError for x <= 0, as Python's. */
  function mathLog(x) {
    x = toFloat(x);
    if (Number.isNaN(x)) return NaN;
    if (x <= 0) throw valueError("math domain error");
    return Math.log(x);
  }

  /** float ** float: OverflowError where C's pow overflows. */
  function floatPow(x, y) {
    const r = Math.pow(x, y);
    if (!Number.isFinite(r) && Number.isFinite(x) && Number.isFinite(y)) {
      throw new PyError("OverflowError", "(34, 'Numerical result out of range')");
    }
    return r;
  }

  /** int(x) of a float: truncation towards zero. */
  function floatToInt(x) {
    if (Number.isNaN(x)) throw valueError("cannot convert float NaN to integer");
    if (!Number.isFinite(x)) throw new PyError("OverflowError", "cannot convert float infinity to integer");
    return BigInt(Math.trunc(x));
  }

  /** The decimal digits and exponent of |x| rounded to `digits` significant digits, half to even
   *  (Python's correctly rounded formatting; toPrecision would round ties away from zero). */
  function roundDigits(x, digits) {
    const [mantissa, exponent] = Math.abs(x).toExponential(99).split("e"); // 100 exact significant digits
    const all = mantissa.replace(".", "");
    let exp = parseInt(exponent, 10);
    let kept = all.slice(0, digits);
    const rest = all.slice(digits);
    const up = rest[0] > "5" || (rest[0] === "5" && (/[1-9]/.test(rest.slice(1)) || "13579".includes(kept.slice(-1))));
    if (up) {
      const n = (BigInt(kept) + 1n).toString();
      if (n.length > digits) {
        exp += 1;
        kept = n.slice(0, digits);
      } else kept = n;
    }
    return { kept, exp }; // |x| ~ 0.kept * 10 ** (exp + 1)
  }

  /** Digits and exponent laid out as Python does: fixed notation for -4 < decpt <= limit, else exponent. */
  function layOut(sign, digits, decpt, limit, addDotZero) {
    if (decpt <= -4 || decpt > limit) {
      const e = decpt - 1;
      const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
      const ex = `${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
      return `${sign}${mant}e${ex}`;
    }
    let text;
    if (decpt <= 0) text = `0.${"0".repeat(-decpt)}${digits}`;
    else if (decpt >= digits.length) text = digits + "0".repeat(decpt - digits.length) + (addDotZero ? ".0" : "");
    else text = `${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
    return sign + text;
  }

  function special(x) {
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
    return null;
  }

  /** repr(float): the shortest digits that round-trip, Python's layout ("1e+16", "0.0001", "2.0"). */
  function reprFloat(x) {
    const s = special(x);
    if (s) return s;
    const sign = x < 0 || Object.is(x, -0) ? "-" : "";
    if (x === 0) return `${sign}0.0`;
    const [mantissa, exponent] = Math.abs(x).toExponential().split("e");
    const digits = mantissa.replace(".", "");
    return layOut(sign, digits, parseInt(exponent, 10) + 1, 16, true);
  }

  /** format(x, "g") (and ".6g"): 6 significant digits, trailing zeros dropped. */
  function formatG(x, precision = 6) {
    x = toFloat(x);
    const s = special(x);
    if (s) return s;
    const sign = x < 0 || Object.is(x, -0) ? "-" : "";
    if (x === 0) return `${sign}0`;
    const { kept, exp } = roundDigits(x, precision);
    const digits = kept.replace(/0+$/, "") || "0";
    return layOut(sign, digits, exp + 1, precision, false);
  }

  // Python's str.isprintable() is false for these categories (and the space is printable).
  const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  const hex = (n, width) => n.toString(16).padStart(width, "0");

  /** repr(str): Python's quotes and escapes. */
  function reprStr(s) {
    const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
    let out = quote;
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === quote || ch === "\\") out += "\\" + ch;
      else if (ch === "\t") out += "\\t";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (c < 0x20 || c === 0x7f) out += "\\x" + hex(c, 2);
      else if (c < 0x7f || (ch !== " " && !NOT_PRINTABLE.test(ch))) out += ch;
      else if (c <= 0xff) out += "\\x" + hex(c, 2);
      else if (c <= 0xffff) out += "\\u" + hex(c, 4);
      else out += "\\U" + hex(c, 8);
    }
    return out + quote;
  }

  /** repr() of a JSON value as Python holds it (dict, list, str, int, float, bool, None). */
  function repr(v) {
    if (v === null || v === undefined) return "None";
    if (v === true) return "True";
    if (v === false) return "False";
    if (isInt(v)) return v.toString();
    if (isFloat(v)) return reprFloat(v);
    if (isStr(v)) return reprStr(v);
    if (isList(v)) return `[${v.map(repr).join(", ")}]`;
    if (isDict(v)) return `{${[...v].map(([k, x]) => `${repr(k)}: ${repr(x)}`).join(", ")}}`;
    return String(v);
  }

  /** str() of a value in an f-string: a str as is, anything else its repr. */
  const str = (v) => (isStr(v) ? v : repr(v));

  /** f"{s:.n}": the first n characters (code points) of s. */
  const cut = (s, n) => Array.from(s).slice(0, n).join("");
  /** f"{v!r:.80}" */
  const r80 = (v) => cut(repr(v), 80);

  /** type(v).__name__ */
  function typeName(v) {
    if (v === null) return "NoneType";
    if (typeof v === "boolean") return "bool";
    if (isInt(v)) return "int";
    if (isFloat(v)) return "float";
    if (isStr(v)) return "str";
    if (isList(v)) return "list";
    return "dict";
  }

  /** Python's sorted() of strings: by code point. */
  function sortedStrings(items) {
    const points = (s) => Array.from(s, (ch) => ch.codePointAt(0));
    return [...items].sort((a, b) => {
      const x = points(a), y = points(b);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
      return x.length - y.length;
    });
  }

  /** dict literal with Python's value types: numbers written as BigInt are ints, others floats. */
  function dict(object) {
    const map = new Map();
    for (const [key, value] of Object.entries(object)) {
      map.set(key, value !== null && typeof value === "object" && !isList(value) ? dict(value) : value);
    }
    return map;
  }

  /** cfg.get(key): the value, or null (None) when absent. */
  const get = (map, key) => (map.has(key) ? map.get(key) : null);

  // ---------------------------------------------------------------------------------------------
  // json.loads, as Python 3.11's C scanner reads (and rejects) a document
  // ---------------------------------------------------------------------------------------------

  class JSONDecodeError {
    constructor(msg, pos) {
      this.msg = msg;
      this.pos = pos;
    }
  }
  // json.loads fails with RecursionError this deep (Python's recursion limit, less the frames below it)
  const JSON_RECURSION_LIMIT = 987;
  const MAX_INT_DIGITS = 4300; // sys.get_int_max_str_digits()
  const isWs = (c) => c === " " || c === "\t" || c === "\n" || c === "\r";
  const isDigit = (c) => c !== undefined && c >= "0" && c <= "9";

  /** json.loads(text): the value, or JSONDecodeError / RecursionError / ValueError as Python raises. */
  function jsonLoads(text) {
    const s = Array.from(text); // Python indexes code points
    const n = s.length;

    function scanString(end) {
      // py_scanstring / scanstring_unicode; end is just past the opening quote
      const begin = end - 1;
      let out = "";
      for (;;) {
        let next = end;
        let c = null;
        for (; next < n; next++) {
          c = s[next];
          if (c === '"' || c === "\\") break;
          if (c.codePointAt(0) <= 0x1f) throw new JSONDecodeError("Invalid control character at", next);
        }
        if (next >= n) throw new JSONDecodeError("Unterminated string starting at", begin);
        out += s.slice(end, next).join("");
        next++;
        if (c === '"') return [out, next];
        if (next === n) throw new JSONDecodeError("Unterminated string starting at", begin);
        c = s[next];
        if (c !== "u") {
          end = next + 1;
          const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
          if (!(c in simple)) throw new JSONDecodeError("Invalid \\escape", end - 2);
          out += simple[c];
        } else {
          next++;
          end = next + 4;
          if (end >= n) throw new JSONDecodeError("Invalid \\uXXXX escape", next - 1);
          const hex4 = (from, stop) => {
            const digits = s.slice(from, stop).join("");
            if (!/^[0-9a-fA-F]{4}$/.test(digits)) throw new JSONDecodeError("Invalid \\uXXXX escape", stop - 5);
            return parseInt(digits, 16);
          };
          let code = hex4(next, end);
          next = end;
          if (code >= 0xd800 && code <= 0xdbff && end + 6 < n && s[next] === "\\" && s[next + 1] === "u") {
            end += 6;
            const low = hex4(next + 2, end);
            if (low >= 0xdc00 && low <= 0xdfff) code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            else end -= 6;
          }
          out += String.fromCodePoint(code);
        }
      }
    }

    function matchNumber(start) {
      // _match_number_unicode
      let idx = start;
      if (s[idx] === "-") {
        idx++;
        if (idx >= n) throw new JSONDecodeError("Expecting value", start);
      }
      if (s[idx] >= "1" && s[idx] <= "9") {
        idx++;
        while (idx < n && isDigit(s[idx])) idx++;
      } else if (s[idx] === "0") idx++;
      else throw new JSONDecodeError("Expecting value", start);
      let isFloatNumber = false;
      if (idx < n - 1 && s[idx] === "." && isDigit(s[idx + 1])) {
        isFloatNumber = true;
        idx += 2;
        while (idx < n && isDigit(s[idx])) idx++;
      }
      if (idx < n - 1 && (s[idx] === "e" || s[idx] === "E")) {
        const eStart = idx;
        idx++;
        if (idx < n - 1 && (s[idx] === "-" || s[idx] === "+")) idx++;
        while (idx < n && isDigit(s[idx])) idx++;
        if (isDigit(s[idx - 1])) isFloatNumber = true;
        else idx = eStart;
      }
      const literal = s.slice(start, idx).join("");
      if (isFloatNumber) return [Number(literal), idx];
      const digits = literal.replace("-", "").length;
      if (digits > MAX_INT_DIGITS) {
        throw valueError(
          `Exceeds the limit (${MAX_INT_DIGITS} digits) for integer string conversion: value has ${digits} digits; ` +
            "use sys.set_int_max_str_digits() to increase the limit"
        );
      }
      return [BigInt(literal), idx];
    }

    function skip(idx) {
      while (idx < n && isWs(s[idx])) idx++;
      return idx;
    }

    function scanOnce(idx, depth) {
      // scan_once_unicode
      if (idx >= n) throw new JSONDecodeError("Expecting value", idx);
      const c = s[idx];
      const word = (w) => s.slice(idx, idx + w.length).join("") === w;
      if (c === '"') return scanString(idx + 1);
      if (c === "{" || c === "[") {
        if (depth >= JSON_RECURSION_LIMIT) throw new PyError("RecursionError", "maximum recursion depth exceeded");
        return c === "{" ? parseObject(idx + 1, depth + 1) : parseArray(idx + 1, depth + 1);
      }
      if (c === "n" && word("null")) return [null, idx + 4];
      if (c === "t" && word("true")) return [true, idx + 4];
      if (c === "f" && word("false")) return [false, idx + 5];
      if (c === "N" && word("NaN")) return [NaN, idx + 3];
      if (c === "I" && word("Infinity")) return [Infinity, idx + 8];
      if (c === "-" && word("-Infinity")) return [-Infinity, idx + 9];
      return matchNumber(idx);
    }

    function parseObject(idx, depth) {
      // _parse_object_unicode: duplicate keys keep their first place and their last value, as a dict
      const obj = new Map();
      idx = skip(idx);
      if (idx >= n || s[idx] !== "}") {
        for (;;) {
          if (idx >= n || s[idx] !== '"') {
            throw new JSONDecodeError("Expecting property name enclosed in double quotes", idx);
          }
          const [key, afterKey] = scanString(idx + 1);
          idx = skip(afterKey);
          if (idx >= n || s[idx] !== ":") throw new JSONDecodeError("Expecting ':' delimiter", idx);
          idx = skip(idx + 1);
          const [value, afterValue] = scanOnce(idx, depth);
          obj.set(key, value);
          idx = skip(afterValue);
          if (idx < n && s[idx] === "}") break;
          if (idx >= n || s[idx] !== ",") throw new JSONDecodeError("Expecting ',' delimiter", idx);
          idx = skip(idx + 1);
        }
      }
      return [obj, idx + 1];
    }

    function parseArray(idx, depth) {
      // _parse_array_unicode
      const list = [];
      idx = skip(idx);
      if (idx >= n || s[idx] !== "]") {
        for (;;) {
          const [value, after] = scanOnce(idx, depth);
          list.push(value);
          idx = skip(after);
          if (idx < n && s[idx] === "]") break;
          if (idx >= n || s[idx] !== ",") throw new JSONDecodeError("Expecting ',' delimiter", idx);
          idx = skip(idx + 1);
        }
      }
      return [list, idx + 1];
    }

    // JSONDecoder.decode
    const [value, end] = scanOnce(skip(0), 0);
    if (skip(end) !== n) throw new JSONDecodeError("Extra data", skip(end));
    return [value, s];
  }

  // ---------------------------------------------------------------------------------------------
  // posenc.hf.fields: _read_json, config_dict and the checked accessors
  // ---------------------------------------------------------------------------------------------

  const MAX_LAYERS = 1n << 16n;
  const MAX_HEAD_DIM = 1n << 16n;
  const MAX_DEPTH = 64;

  /** The code point at which a UTF-8 decoder (Python's, strict) fails, or -1. */
  function utf8ErrorStart(bytes) {
    for (let i = 0; i < bytes.length; ) {
      const b = bytes[i];
      let need, lo = 0x80, hi = 0xbf;
      if (b < 0x80) {
        i++;
        continue;
      } else if (b >= 0xc2 && b <= 0xdf) need = 1;
      else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        if (b === 0xe0) lo = 0xa0;
        if (b === 0xed) hi = 0x9f;
      } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        if (b === 0xf0) lo = 0x90;
        if (b === 0xf4) hi = 0x8f;
      } else return i;
      for (let k = 1; k <= need; k++) {
        const c = bytes[i + k];
        if (c === undefined) return i;
        if (k === 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) return i;
      }
      i += need + 1;
    }
    return -1;
  }

  // str.isspace() (str.strip and str.split use it)
  const PY_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;

  /** posenc.hf.fields._read_json: the JSON value in the bytes of the file `name`. */
  function readJson(bytes, name) {
    const quoted = repr(name);
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      throw valueError(`config file ${quoted} starts with a byte-order mark; save it as UTF-8 without one`);
    }
    const bad = utf8ErrorStart(bytes);
    if (bad >= 0) {
      throw valueError(`config file ${quoted} is not UTF-8 text: byte ${bad} is 0x${hex(bytes[bad], 2)}`);
    }
    const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
    if (Array.from(text).every((ch) => PY_SPACE.test(ch))) {
      throw valueError(`config file ${quoted} is empty; a config.json holds one JSON object`);
    }
    try {
      return jsonLoads(text)[0];
    } catch (error) {
      if (error instanceof JSONDecodeError) {
        const before = Array.from(text).slice(0, error.pos);
        const line = before.filter((c) => c === "\n").length + 1;
        const column = error.pos - before.lastIndexOf("\n");
        throw valueError(`config file ${quoted} is not JSON: ${error.msg} at line ${line} column ${column}`);
      }
      if (error instanceof PyError && error.type === "RecursionError") {
        throw valueError(`config file ${quoted} is nested more than ${MAX_DEPTH} levels deep`);
      }
      if (error instanceof PyError && error.type === "ValueError") {
        throw valueError(`config file ${quoted} holds a number Python will not read: ${error.message}`);
      }
      throw error;
    }
  }

  /** posenc.hf.fields._plain: the depth check of the deep copy (JSON values need no other). */
  function plain(value, where, depth = 0) {
    if (depth > MAX_DEPTH) throw valueError(`config is nested more than ${MAX_DEPTH} levels deep, at ${cut(where, 100)}`);
    if (isDict(value)) {
      const copy = new Map();
      for (const [key, item] of value) copy.set(key, plain(item, `${where}[${repr(key)}]`, depth + 1));
      return copy;
    }
    if (isList(value)) return value.map((item, index) => plain(item, `${where}[${index}]`, depth + 1));
    return value;
  }

  /** posenc.hf.fields.config_dict, for the bytes of a config.json named `name`. */
  function configDict(bytes, name) {
    let cfg = readJson(bytes, name);
    if (!isDict(cfg)) throw valueError(`config must hold a JSON object, got ${typeName(cfg)}`);
    cfg = plain(cfg, "config");
    const text = get(cfg, "text_config");
    if (text !== null && !isDict(text)) {
      throw valueError(`config['text_config'] must be a JSON object (the text model's fields), got ${r80(text)}`);
    }
    if (isDict(text)) {
      const merged = new Map([...cfg].filter(([key]) => !key.endsWith("_config")));
      for (const [key, value] of text) merged.set(key, value);
      merged.set("model_type", truthy(get(text, "model_type")) ? get(text, "model_type") : get(cfg, "model_type"));
      cfg = merged;
    }
    return cfg;
  }

  const family = (cfg) => `(model_type ${r80(get(cfg, "model_type"))})`; // _family
  const fieldName = (name) => "config" + name.split(".").map((part) => `[${repr(part)}]`).join(""); // _field

  /** config_int */
  function configInt(cfg, name, value, maximum = null) {
    if (!isInt(value) || value < 1n || (maximum !== null && value > maximum)) {
      const most = maximum !== null ? ` and <= ${maximum}` : "";
      throw valueError(`${fieldName(name)} must be an int >= 1${most}, got ${r80(value)} ${family(cfg)}`);
    }
    return value;
  }

  /** config_number */
  function configNumber(cfg, name, value) {
    if (!isNumber(value) || !isFinite(value) || le(value, 0n)) {
      throw valueError(`${fieldName(name)} must be a finite number > 0, got ${r80(value)} ${family(cfg)}`);
    }
    return toFloat(value);
  }

  /** config_mapping: a new Map ({} for None). */
  function configMapping(cfg, name, value) {
    if (value === null) return new Map();
    if (!isDict(value)) {
      throw valueError(`${fieldName(name)} must be a dict (a JSON object) or null, got ${r80(value)} ${family(cfg)}`);
    }
    return new Map(value);
  }

  /** config_bool */
  function configBool(cfg, name, fallback) {
    if (!cfg.has(name)) return fallback;
    const value = cfg.get(name);
    if (value === null) return false;
    if (typeof value !== "boolean") throw valueError(`${fieldName(name)} must be true or false, got ${r80(value)} ${family(cfg)}`);
    return value;
  }

  /** config_flags: a list of exactly `length` flags 0 or 1 (0.0 and 1.0 compare equal, as in Python). */
  function configFlags(cfg, name, value, length) {
    const flag = (v) => isNumber(v) && (eq(v, 0n) || eq(v, 1n));
    if (!isList(value) || !value.every(flag)) {
      throw valueError(`${fieldName(name)} must be a list of ints (1: RoPE, 0: NoPE), got ${r80(value)} ${family(cfg)}`);
    }
    if (BigInt(value.length) !== length) {
      throw valueError(`${fieldName(name)} must have num_hidden_layers = ${length} entries, got ${value.length} ${family(cfg)}`);
    }
    return value;
  }

  /** raw_rope_parameters */
  function rawRopeParameters(cfg) {
    const scaling = configMapping(cfg, "rope_scaling", get(cfg, "rope_scaling"));
    if (scaling.size || get(cfg, "rope_parameters") !== null) {
      return scaling.size ? scaling : configMapping(cfg, "rope_parameters", get(cfg, "rope_parameters"));
    }
    const own = defaultsOf(cfg).get("rope_parameters");
    return new Map(own || []);
  }

  /** ALIASES */
  const ALIASES = {
    hidden_size: ["n_embd", "n_embed", "d_model"],
    num_attention_heads: ["n_head", "n_heads", "num_heads"],
    num_hidden_layers: ["n_layer", "n_layers", "num_layers"],
    max_position_embeddings: ["n_positions"],
    no_rope_layer_interval: ["nope_layer_interval"],
  };

  // DEFAULTS: ints are written as BigInt (2048n), floats as numbers (10000.0 reads 10000 here).
  const LLAMA4 = { head_dim: 128n, max_position_embeddings: 131072n, rope_theta: 500000.0, no_rope_layer_interval: 4n, floor_scale: 8192n, attn_scale: 0.1 };
  const GEMMA3 = {
    hidden_size: 2304n, num_attention_heads: 8n, head_dim: 256n, num_hidden_layers: 26n, query_pre_attn_scalar: 256n,
    max_position_embeddings: 131072n, rope_theta: 1000000.0, rope_local_base_freq: 10000.0, sliding_window_pattern: 6n,
  };
  const QWEN2_VL = { mrope_section: [16n, 24n, 24n], rope_theta: 1000000.0, max_position_embeddings: 32768n };
  const DEFAULTS = dict({
    llama: { max_position_embeddings: 2048n },
    mistral: { max_position_embeddings: 131072n },
    qwen2: { max_position_embeddings: 32768n },
    qwen3: { head_dim: 128n, max_position_embeddings: 32768n },
    phi3: { original_max_position_embeddings: 4096n, max_position_embeddings: 4096n },
    gpt_neox: { rotary_pct: 0.25, rotary_emb_base: 10000.0, max_position_embeddings: 2048n },
    gptj: { rotary_dim: 64n, max_position_embeddings: 2048n },
    falcon: { max_position_embeddings: 2048n },
    gemma3: GEMMA3,
    gemma3_text: GEMMA3,
    qwen2_vl: QWEN2_VL,
    qwen2_vl_text: QWEN2_VL,
    llama4: LLAMA4,
    llama4_text: LLAMA4,
    deepseek_v2: { qk_nope_head_dim: 128n, qk_rope_head_dim: 64n, max_position_embeddings: 2048n },
    deepseek_v3: { qk_nope_head_dim: 128n, qk_rope_head_dim: 64n, max_position_embeddings: 4096n },
    kimi_k2: { qk_nope_head_dim: 128n, qk_rope_head_dim: 64n, max_position_embeddings: 4096n }, // as V3
    mpt: { max_seq_len: 2048n },
    gpt_oss: {
      head_dim: 64n, max_position_embeddings: 131072n, rope_theta: 150000.0,
      rope_parameters: { rope_type: "yarn", factor: 32.0, beta_fast: 32.0, beta_slow: 1.0, truncate: false, original_max_position_embeddings: 4096n },
    },
    smollm3: { max_position_embeddings: 32768n, rope_theta: 2000000.0, no_rope_layer_interval: 4n },
    cohere2: { head_dim: 128n, max_position_embeddings: 8192n },
    glm4: { head_dim: 128n, max_position_embeddings: 131072n, rope_parameters: { partial_rotary_factor: 0.5 } },
    glm4_moe: { max_position_embeddings: 131072n, rope_parameters: { partial_rotary_factor: 0.5 } },
    qwen3_next: { head_dim: 256n, max_position_embeddings: 32768n, rope_parameters: { partial_rotary_factor: 0.25 } },
    deepseek_v32: { qk_nope_head_dim: 128n, qk_rope_head_dim: 64n, max_position_embeddings: 163840n },
    t5: { d_kv: 64n, relative_attention_num_buckets: 32n, relative_attention_max_distance: 128n },
  });

  /** DEFAULTS.get(cfg.get("model_type"), {}) (a model_type that is not a str has none). */
  const defaultsOf = (cfg) => {
    const type = get(cfg, "model_type");
    return (isStr(type) && DEFAULTS.get(type)) || new Map();
  };

  /** field */
  function field(cfg, key, fallback = null, required = false) {
    for (const name of [key, ...(ALIASES[key] || [])]) if (get(cfg, name) !== null) return cfg.get(name);
    const own = defaultsOf(cfg);
    const value = own.has(key) ? own.get(key) : fallback;
    if (value === null && required) {
      const also = ALIASES[key] ? ` (or ${ALIASES[key].map(repr).join(", ")})` : "";
      throw valueError(`config is missing ${repr(key)}${also}, which model_type ${r80(get(cfg, "model_type"))} needs`);
    }
    return value;
  }

  /** MAXIMA */
  const MAXIMA = { num_hidden_layers: MAX_LAYERS, head_dim: MAX_HEAD_DIM, num_attention_heads: 1n << 16n, relative_attention_num_buckets: 1n << 16n };

  /** count */
  function count(cfg, key, fallback = null, maximum = null) {
    const value = field(cfg, key, fallback, true);
    const name = [key, ...(ALIASES[key] || [])].find((n) => get(cfg, n) !== null) || key;
    return configInt(cfg, name, value, maximum !== null ? maximum : MAXIMA[key] || null);
  }

  const LENGTH_TYPES = ["llama3", "yarn", "longrope"];

  /** rope_parameters: one rope_parameters dict filled in as transformers 5 standardizes it. */
  function ropeParameters(cfg, given, { theta, nested = false, renames = {} }) {
    const params = new Map([...(given || [])].filter(([key]) => key !== "partial_rotary_factor"));
    const legacy = params.has("type") ? params.get("type") : null;
    params.delete("type");
    if (!params.has("rope_type")) params.set("rope_type", truthy(legacy) ? legacy : "default");
    let ropeType = params.get("rope_type");
    if (!isStr(ropeType)) {
      const where = nested || get(cfg, "rope_scaling") === null ? "rope_parameters" : "rope_scaling";
      throw valueError(
        `config[${repr(where)}]['rope_type'] must be a string naming the scaling, got ${r80(ropeType)} ` +
          `(model_type ${r80(get(cfg, "model_type"))})`
      );
    }
    ropeType = Object.prototype.hasOwnProperty.call(renames, ropeType) ? renames[ropeType] : ropeType;
    params.set("rope_type", ropeType);
    const inside = params.has("rope_theta") ? params.get("rope_theta") : null;
    params.delete("rope_theta");
    params.set("rope_theta", configNumber(cfg, "rope_theta", inside === null ? theta : inside));
    if (ropeType === "default") return new Map([["rope_type", "default"], ["rope_theta", params.get("rope_theta")]]);
    const key = "original_max_position_embeddings";
    let length = field(cfg, "max_position_embeddings");
    if (length !== null) length = configInt(cfg, "max_position_embeddings", length);
    if (LENGTH_TYPES.includes(ropeType)) {
      if (!nested && field(cfg, key) !== null) params.set(key, field(cfg, key));
      else if (get(params, key) === null) params.set(key, length !== null ? length : field(cfg, key));
    }
    if (ropeType === "dynamic") params.set(key, length);
    if ((ropeType === "yarn" || ropeType === "longrope") && get(params, "factor") === null && truthy(length) && get(params, key) !== null) {
      const ratio = trueDiv(length, configInt(cfg, key, params.get(key)));
      if (ratio >= 1 || ropeType === "yarn") params.set("factor", ratio);
      else if (!params.has("attention_factor")) params.set("attention_factor", 1.0);
    }
    return params;
  }

  /** scaling_label */
  function scalingLabel(params) {
    if (!params || !params.size || (params.has("rope_type") ? params.get("rope_type") : "default") === "default") return null;
    const factor = get(params, "factor");
    return factor === null ? str(params.get("rope_type")) : `${str(params.get("rope_type"))} x${formatG(factor)}`;
  }

  // ---------------------------------------------------------------------------------------------
  // posenc._checks, posenc.rope.scaling, posenc.rope.longrope: the checks a rotary layer runs
  // ---------------------------------------------------------------------------------------------

  /** check_positive_int */
  function checkPositiveInt(name, value) {
    if (!isInt(value)) throw valueError(`${name} must be an int >= 1, got ${repr(value)} (${typeName(value)})`);
    if (value < 1n) throw valueError(`${name} must be >= 1, got ${value}`);
    return value;
  }

  /** check_nonnegative_int */
  function checkNonnegativeInt(name, value) {
    if (!isInt(value)) throw valueError(`${name} must be an int >= 0, got ${repr(value)} (${typeName(value)})`);
    if (value < 0n) throw valueError(`${name} must be >= 0, got ${value}`);
    return value;
  }

  /** check_even_dim (the table-size check cannot fail for the dimensions the reader allows) */
  function checkEvenDim(name, value) {
    value = checkPositiveInt(name, value);
    if (value > 1n << 31n) {
      throw valueError(`${name} = ${r80(value)} needs a table of ${value} elements, more than MAX_TABLE_ELEMENTS = 2**31`);
    }
    if (value % 2n) {
      throw valueError(`${name} must be even (channels come in sin/cos pairs), got ${value}; use ${value - 1n} or ${value + 1n}`);
    }
    return value;
  }

  /** check_base */
  function checkBase(name, value) {
    if (!isNumber(value)) throw valueError(`${name} must be a number > 1, got ${repr(value)}`);
    value = toFloat(value);
    if (!Number.isFinite(value) || value <= 1.0) throw valueError(`${name} must be a finite number > 1, got ${reprFloat(value)}`);
    return value;
  }

  /** check_number */
  function checkNumber(name, value, minimum, inclusive) {
    const bound = inclusive ? `>= ${formatG(minimum)}` : `> ${formatG(minimum)}`;
    if (!isNumber(value)) throw valueError(`${name} must be a number ${bound}, got ${repr(value)}`);
    value = toFloat(value);
    if (!Number.isFinite(value) || value < minimum || (value === minimum && !inclusive)) {
      throw valueError(`${name} must be a finite number ${bound}, got ${reprFloat(value)}`);
    }
    return value;
  }

  /** check_choice */
  function checkChoice(name, value, choices) {
    if (!choices.some((c) => c === value)) {
      throw valueError(`${name} must be one of ${choices.map(repr).join(", ")}; got ${repr(value)}`);
    }
    return value;
  }

  /** scaling._real: params[key] as a finite float (above `minimum` if given). */
  function real(params, key, minimum = null, inclusive = true) {
    const name = `scaling[${repr(key)}]`;
    if (minimum !== null) {
      params.set(key, checkNumber(name, params.get(key), minimum, inclusive));
      return params.get(key);
    }
    const value = params.get(key);
    if (!isNumber(value) || !isFinite(value)) throw valueError(`${name} must be a finite number, got ${repr(value)}`);
    params.set(key, toFloat(value));
    return params.get(key);
  }

  const checkFactor = (params) => real(params, "factor", 1.0); // _check_factor

  /** _mscale */
  const mscale = (scale, weight = 1.0) => (scale <= 1.0 ? 1.0 : 0.1 * weight * mathLog(scale) + 1.0);

  /** The validators of ROPE_SCALINGS: _check_nothing, _check_linear, _check_dynamic, _check_yarn,
   *  check_longrope (posenc.rope.longrope), _check_llama3. */
  const VALIDATE = {
    default() {},
    linear(params) {
      checkFactor(params);
      if (get(params, "original_max_position_embeddings") === null) params.delete("original_max_position_embeddings");
      else real(params, "original_max_position_embeddings", 0.0, false);
    },
    dynamic(params) {
      checkFactor(params);
      real(params, "original_max_position_embeddings", 0.0, false);
    },
    yarn(params) {
      checkFactor(params);
      real(params, "original_max_position_embeddings", 0.0, false);
      if (params.has("truncate") && typeof params.get("truncate") !== "boolean") {
        throw valueError(`scaling['truncate'] must be True or False, got ${repr(params.get("truncate"))}`);
      }
      if (get(params, "attention_factor") !== null) real(params, "attention_factor", 0.0);
      for (const key of ["mscale", "mscale_all_dim", "beta_fast"]) if (get(params, key) !== null) real(params, key);
      if (get(params, "beta_slow") !== null) real(params, "beta_slow", 0.0);
      const betaFast = truthy(get(params, "beta_fast")) ? params.get("beta_fast") : 32.0;
      const betaSlow = truthy(get(params, "beta_slow")) ? params.get("beta_slow") : 1.0;
      if (betaFast < betaSlow) {
        throw valueError(
          `scaling['beta_fast'] must be >= scaling['beta_slow'], got beta_fast=${formatG(betaFast)} ` +
            `and beta_slow=${formatG(betaSlow)} (0 or None means the default, 32 and 1)`
        );
      }
      if (get(params, "attention_factor") === null && truthy(get(params, "mscale")) && truthy(get(params, "mscale_all_dim"))) {
        if (mscale(params.get("factor"), params.get("mscale_all_dim")) === 0.0) {
          throw valueError(
            `scaling['mscale_all_dim'] = ${formatG(params.get("mscale_all_dim"))} makes the attention factor's ` +
              `denominator 0.1 * mscale_all_dim * ln(factor) + 1 zero for factor = ${formatG(params.get("factor"))}`
          );
        }
      }
    },
    longrope(params) {
      for (const key of ["short_factor", "long_factor"]) {
        const values = params.get(key); // _check_factor_list
        if (!isList(values) || !values.length) {
          throw valueError(`scaling[${repr(key)}] must be a non-empty list of finite numbers > 0 (one per channel pair), got ${repr(values)}`);
        }
        params.set(key, values.map((value, index) => checkNumber(`scaling[${repr(key)}][${index}]`, value, 0.0, false)));
      }
      const key = "original_max_position_embeddings";
      params.set(key, checkNumber(`scaling[${repr(key)}]`, params.get(key), 0.0, false));
      if (get(params, "factor") !== null) params.set("factor", checkNumber("scaling['factor']", params.get("factor"), 1.0, true));
      if (get(params, "attention_factor") !== null) {
        params.set("attention_factor", checkNumber("scaling['attention_factor']", params.get("attention_factor"), 0.0, true));
      } else if (get(params, "factor") === null) {
        throw valueError(
          "scaling for rope_type 'longrope' needs 'factor' or 'attention_factor'; transformers derives a " +
            "missing factor as config.max_position_embeddings / original_max_position_embeddings, pass that ratio"
        );
      } else if (params.get("factor") > 1.0 && params.get(key) <= 1.0) {
        throw valueError(
          `scaling[${repr(key)}] must be > 1 for the default attention factor sqrt(1 + ln(factor) / ` +
            `ln(original_max_position_embeddings)), got ${formatG(params.get(key))}; or pass 'attention_factor'`
        );
      }
    },
    llama3(params) {
      checkFactor(params);
      real(params, "original_max_position_embeddings");
      for (const key of ["low_freq_factor", "high_freq_factor"]) {
        if (real(params, key) === 0.0) throw valueError(`scaling[${repr(key)}] must be != 0 (the length is divided by it), got 0.0`);
      }
      const low = params.get("low_freq_factor"), high = params.get("high_freq_factor");
      if (high < low) {
        throw valueError(
          `scaling['high_freq_factor'] must be >= scaling['low_freq_factor'], got high_freq_factor=${formatG(high)} ` +
            `and low_freq_factor=${formatG(low)}`
        );
      }
    },
  };

  /** ROPE_SCALINGS: each type's required and optional keys, and whether it reads the length. */
  const ROPE_SCALINGS = {
    default: { required: [], optional: [] },
    linear: { required: ["factor"], optional: ["original_max_position_embeddings"] },
    dynamic: { required: ["factor", "original_max_position_embeddings"], optional: [], lengthDependent: true },
    yarn: {
      required: ["factor", "original_max_position_embeddings"],
      optional: ["beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"],
    },
    longrope: { required: ["short_factor", "long_factor", "original_max_position_embeddings"], optional: ["factor", "attention_factor"], lengthDependent: true },
    llama3: { required: ["factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"], optional: [] },
  };
  const ROPE_TYPES = Object.keys(ROPE_SCALINGS);
  const COMMON_KEYS = ["rope_type", "type", "rope_theta", "partial_rotary_factor"];
  const HINTS = {};
  for (const type of ["dynamic", "yarn", "llama3", "longrope"]) {
    HINTS[`${type}/original_max_position_embeddings`] =
      "; it is the length the model was trained on, which transformers takes from config.max_position_embeddings";
  }
  HINTS["yarn/factor"] = "; transformers derives a missing factor as config.max_position_embeddings / original_max_position_embeddings";

  /** resolve_base (base is always None where a layer calls it) */
  function resolveBase(scaling) {
    const theta = get(scaling, "rope_theta");
    return theta === null ? 10000.0 : checkBase("scaling['rope_theta']", theta);
  }

  /** parse_scaling */
  function parseScaling(scaling, base) {
    const params = new Map(scaling);
    const legacy = params.has("type") ? params.get("type") : "default";
    params.delete("type");
    if (!params.has("rope_type")) params.set("rope_type", legacy);
    const ropeType = checkChoice("scaling['rope_type']", params.get("rope_type"), ROPE_TYPES);
    const entry = ROPE_SCALINGS[ropeType];
    const allowed = new Set([...COMMON_KEYS, ...entry.required, ...entry.optional]);
    const unknown = sortedStrings([...params.keys()].filter((key) => !allowed.has(key)));
    if (unknown.length) {
      throw valueError(
        `scaling has unknown key(s) ${unknown.map(repr).join(", ")} for rope_type ${repr(ropeType)}; ` +
          `accepted: ${sortedStrings(allowed).map(repr).join(", ")}`
      );
    }
    const missing = entry.required.filter((key) => get(params, key) === null);
    if (missing.length) {
      throw valueError(
        `scaling is missing ${missing.map(repr).join(", ")}, which rope_type ${repr(ropeType)} needs ` +
          `(it needs ${entry.required.map(repr).join(", ")})${HINTS[`${ropeType}/${missing[0]}`] || ""}`
      );
    }
    if (params.has("rope_theta") && checkBase("scaling['rope_theta']", params.get("rope_theta")) !== base) {
      throw valueError(`scaling['rope_theta'] = ${repr(params.get("rope_theta"))} disagrees with base = ${formatG(base)}; pass the same value`);
    }
    VALIDATE[ropeType](params);
    return params;
  }

  /** rope_inv_freq, as far as it can fail: the frequencies of each type (_dynamic, _yarn_ramp,
   *  longrope_frequencies) raise for some parameters that pass the validators. */
  function ropeInvFreq(headDim, scaling, seqLen) {
    checkEvenDim("head_dim", headDim);
    const base = resolveBase(scaling);
    const params = parseScaling(scaling, base);
    const d = Number(headDim);
    const type = params.get("rope_type");
    if (type === "dynamic") {
      // _check_ntk_dim, then ntk_scaled_base
      if (d < 4) throw valueError(`head_dim must be >= 4 for the NTK-aware base change (exponent d/(d-2)), got ${headDim}`);
      const original = params.get("original_max_position_embeddings"), factor = params.get("factor");
      const length = seqLen === null ? original : Math.max(seqLen, original);
      const scale = Math.max(1.0, (factor * length) / original - (factor - 1));
      checkBase("base", base);
      checkNumber("factor", scale, 1.0, true);
      checkBase("base", base * floatPow(scale, d / (d - 2))); // sinusoidal_frequencies
    } else if (type === "yarn") {
      // _yarn_ramp
      const original = params.get("original_max_position_embeddings");
      const betaFast = truthy(get(params, "beta_fast")) ? params.get("beta_fast") : 32.0;
      const betaSlow = truthy(get(params, "beta_slow")) ? params.get("beta_slow") : 1.0;
      const pairIndex = (rotations) => (d * mathLog(original / (rotations * 2 * Math.PI))) / (2 * mathLog(base));
      const low = pairIndex(betaFast), high = pairIndex(betaSlow);
      if (get(params, "truncate") !== false) {
        floatToInt(Math.floor(low));
        floatToInt(Math.ceil(high));
      }
    } else if (type === "longrope") {
      for (const key of ["short_factor", "long_factor"]) {
        if (BigInt(params.get(key).length) !== headDim / 2n) {
          throw valueError(
            `scaling[${repr(key)}] has ${params.get(key).length} entries, expected head_dim / 2 = ${headDim / 2n} ` +
              `(one per channel pair of head_dim ${headDim})`
          );
        }
      }
    }
    return params;
  }

  /** posenc.rope.nd.mrope_pair_axes and mrope_cos_sin's check of the sections' sum. */
  function checkMropeSection(section, headDim) {
    if (!isList(section) || !section.length) {
      throw valueError(`mrope_section must be a non-empty list of ints such as [16, 24, 24], got ${repr(section)}`);
    }
    const sections = section.map((s, a) => checkNonnegativeInt(`mrope_section[${a}]`, s));
    const total = sections.reduce((a, b) => a + b, 0n);
    checkPositiveInt("sum(mrope_section)", total);
    if (total !== headDim / 2n) {
      throw valueError(`mrope_section must sum to head_dim / 2 = ${headDim / 2n}, got ${repr(section)} (sum ${total})`);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // posenc.hf.layers and posenc.hf.bias_layers: a layer is its describe() row
  // ---------------------------------------------------------------------------------------------

  /** HFLayer.row (and NoPELayer's, RecurrentLayer's, ALiBiLayer's, T5BiasLayer's). */
  function plainLayer(kind, softmaxScale, temperature = null) {
    let nope = null;
    if (temperature) nope = `1 + ${formatG(temperature[1])} * log1p(floor((p + 1) / ${formatG(temperature[0])}))`;
    return { scheme: kind, theta: null, scaling: null, rotary: 0n, layout: null, nope_temperature: nope, softmax_scale: toFloat(softmaxScale) };
  }

  /** RotaryLayer.__init__ (its checks, and cos_sin at position 0: rope_cos_sin or mrope_cos_sin) and row. */
  function rotaryLayer({ kind = "rope", rotaryDim, ropeParameters: params, style = "half", mropeSection = null, softmaxScale, headDim = null }) {
    const widest = headDim !== null ? headDim : rotaryDim;
    if (!isInt(rotaryDim) || rotaryDim < 2n || rotaryDim > widest) {
      throw valueError(`rotary_dim must be an even int in [2, head_dim = ${headDim === null ? "None" : headDim}], got ${repr(rotaryDim)}`);
    }
    if (rotaryDim % 2n) throw valueError(`rotary_dim must be even (channels turn in pairs), got ${rotaryDim}`);
    const scale = toFloat(softmaxScale);
    if (mropeSection !== null) {
      checkMropeSection(mropeSection, rotaryDim);
      const type = params.has("rope_type") ? params.get("rope_type") : get(params, "type");
      const byLength = isStr(type) && ROPE_SCALINGS[type] && ROPE_SCALINGS[type].lengthDependent;
      ropeInvFreq(rotaryDim, params, byLength ? 1.0 : null);
    } else {
      const parsed = parseScaling(params, resolveBase(params)); // rope_cos_sin
      ropeInvFreq(rotaryDim, parsed, ROPE_SCALINGS[parsed.get("rope_type")].lengthDependent ? 1.0 : null);
    }
    return {
      scheme: mropeSection !== null ? "mrope" : kind,
      theta: toFloat(params.get("rope_theta")),
      scaling: scalingLabel(params),
      rotary: rotaryDim,
      layout: style === "half" ? "half" : "interleaved",
      nope_temperature: null,
      softmax_scale: scale,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // posenc.hf.families: one builder per family, each returning its layers' rows
  // ---------------------------------------------------------------------------------------------

  const NESTED = ["full_attention", "sliding_attention"];
  const repeat = (row, n) => Array.from({ length: Number(n) }, () => row);

  /** _head_dim */
  function headDimOf(cfg, explicit = true) {
    if (explicit && field(cfg, "head_dim") !== null) return count(cfg, "head_dim", null, MAX_HEAD_DIM);
    const width = count(cfg, "hidden_size"), heads = count(cfg, "num_attention_heads");
    if (width < heads) {
      throw valueError(
        `config's hidden_size = ${width} is smaller than num_attention_heads = ${heads}: each head would have ` +
          `hidden_size // num_attention_heads = 0 channels; give head_dim, or check the two (model_type ` +
          `${r80(get(cfg, "model_type"))})`
      );
    }
    if (width / heads > MAX_HEAD_DIM) throw valueError(`config's hidden_size // num_attention_heads = ${width / heads} must be <= ${MAX_HEAD_DIM}`);
    return width / heads;
  }

  /** _flat_rope */
  function flatRope(cfg, theta = 10000.0, renames = {}, params = null) {
    params = params === null ? rawRopeParameters(cfg) : params;
    return ropeParameters(cfg, params, { theta: field(cfg, "rope_theta", theta), renames });
  }

  /** _partial */
  function partial(cfg, fallback = 1.0, topLevel = "partial_rotary_factor") {
    const inside = get(rawRopeParameters(cfg), "partial_rotary_factor");
    const value = inside !== null ? inside : get(cfg, topLevel);
    return value !== null ? configNumber(cfg, "partial_rotary_factor", value) : fallback;
  }

  const numLayers = (cfg) => count(cfg, "num_hidden_layers", null, MAX_LAYERS); // _num_layers

  /** _rotary: a rotary layer, its errors completed with the fields they come from. */
  function rotary(cfg, headDim, rotaryDim, params, options) {
    try {
      return rotaryLayer({ rotaryDim, ropeParameters: params, headDim, ...options });
    } catch (error) {
      if (!(error instanceof PyError) || error.type !== "ValueError") throw error;
      const given = field(cfg, "head_dim") !== null ? "head_dim" : "hidden_size // num_attention_heads";
      throw valueError(
        `${error.message}; in the config, head_dim = ${headDim} (${given}) and rotary_dim = ${rotaryDim} ` +
          `(model_type ${r80(get(cfg, "model_type"))})`
      );
    }
  }

  /** int(head_dim * fraction) */
  const fractionOf = (headDim, fraction) => floatToInt(Number(headDim) * fraction);

  /** build_rope */
  function buildRope(cfg, { params = null, rotaryFraction = 1.0, style = "half", mropeSection = null } = {}) {
    const headDim = headDimOf(cfg);
    const layer = rotary(cfg, headDim, fractionOf(headDim, rotaryFraction), params === null ? flatRope(cfg) : params, {
      style,
      softmaxScale: Math.pow(Number(headDim), -0.5),
      mropeSection,
    });
    return repeat(layer, numLayers(cfg));
  }

  /** build_phi3 */
  function buildPhi3(cfg) {
    const params = flatRope(cfg, 10000.0, { su: "longrope", yarn: "longrope" });
    return buildRope(cfg, { params, rotaryFraction: partial(cfg) });
  }

  /** build_gpt_neox */
  function buildGptNeox(cfg) {
    const params = ropeParameters(cfg, rawRopeParameters(cfg), { theta: field(cfg, "rotary_emb_base") });
    const fraction = partial(cfg, field(cfg, "rotary_pct"), "rotary_pct");
    return buildRope(cfg, { params, rotaryFraction: fraction });
  }

  /** build_gptj */
  function buildGptj(cfg) {
    const headDim = headDimOf(cfg, false);
    let rotaryDim = field(cfg, "rotary_dim");
    rotaryDim = rotaryDim === null ? headDim : configInt(cfg, "rotary_dim", rotaryDim);
    const params = new Map([["rope_type", "default"], ["rope_theta", 10000.0]]);
    const layer = rotary(cfg, headDim, rotaryDim, params, { style: "interleaved", softmaxScale: Math.pow(Number(headDim), -0.5) });
    return repeat(layer, numLayers(cfg));
  }

  /** _layer_types */
  function layerTypes(cfg, allowed, every, other) {
    const n = numLayers(cfg);
    let kinds = get(cfg, "layer_types");
    if (kinds === null) return Array.from({ length: Number(n) }, (_, i) => ((BigInt(i) + 1n) % every ? other : "full_attention"));
    if (!isList(kinds) || BigInt(kinds.length) !== n) {
      const size = isList(kinds) ? `${kinds.length} entries` : r80(kinds);
      throw valueError(`config['layer_types'] must be a list of num_hidden_layers = ${n} names, got ${size}`);
    }
    kinds = kinds.map((kind) => (kind === "attention" ? "full_attention" : kind));
    const bad = kinds.filter((kind) => !allowed.includes(kind));
    if (bad.length) throw valueError(`config['layer_types'] entries must be one of ${allowed.map(repr).join(", ")}, got ${r80(bad[0])}`);
    return kinds;
  }

  /** _gemma3_rope */
  function gemma3Rope(cfg) {
    const params = configMapping(cfg, "rope_parameters", get(cfg, "rope_parameters"));
    const perType = {};
    for (const key of NESTED) {
      const value = configMapping(cfg, `rope_parameters.${key}`, get(params, key));
      perType[key] = value.size ? value : new Map([["rope_type", "default"]]);
    }
    for (const [key, value] of configMapping(cfg, "rope_scaling", get(cfg, "rope_scaling"))) perType.full_attention.set(key, value);
    const theta = { full_attention: field(cfg, "rope_theta"), sliding_attention: field(cfg, "rope_local_base_freq") };
    const out = {};
    for (const key of NESTED) out[key] = ropeParameters(cfg, perType[key], { theta: theta[key], nested: true });
    return out;
  }

  /** build_gemma3 (with _gemma3_layer_types) */
  function buildGemma3(cfg) {
    const headDim = headDimOf(cfg);
    const scale = Math.pow(configNumber(cfg, "query_pre_attn_scalar", field(cfg, "query_pre_attn_scalar")), -0.5);
    const layers = {};
    for (const [kind, params] of Object.entries(gemma3Rope(cfg))) layers[kind] = rotary(cfg, headDim, headDim, params, { softmaxScale: scale });
    const every = get(cfg, "layer_types") === null ? count(cfg, "sliding_window_pattern") : 1n;
    return layerTypes(cfg, NESTED, every, "sliding_attention").map((kind) => layers[kind]);
  }

  /** build_qwen2_vl */
  function buildQwen2Vl(cfg) {
    const params = rawRopeParameters(cfg);
    const popped = get(params, "mrope_section");
    params.delete("mrope_section");
    const section = truthy(popped) ? popped : field(cfg, "mrope_section");
    if (section !== null && !isList(section)) {
      throw valueError(
        `config's mrope_section must be a list of pair counts, one per axis (temporal, height, width), ` +
          `got ${r80(section)} (model_type ${r80(get(cfg, "model_type"))})`
      );
    }
    return buildRope(cfg, { params: flatRope(cfg, 10000.0, { mrope: "default" }, params), mropeSection: section });
  }

  /** build_falcon */
  function buildFalcon(cfg) {
    if (configBool(cfg, "alibi", false)) return buildAlibi(cfg);
    const copy = new Map(cfg);
    copy.set("head_dim", null); // transformers: hidden_size // num_attention_heads
    return buildRope(copy);
  }

  /** build_gpt_oss */
  function buildGptOss(cfg) {
    layerTypes(cfg, NESTED, 2n, "sliding_attention");
    return buildRope(cfg);
  }

  /** The per-layer RoPE flags of Llama 4 and SmolLM3: no_rope_layers, else every interval-th layer NoPE. */
  function ropeFlags(cfg, n) {
    const given = get(cfg, "no_rope_layers");
    if (given === null || (isList(given) && !given.length)) {
      const interval = count(cfg, "no_rope_layer_interval");
      return Array.from({ length: Number(n) }, (_, i) => ((BigInt(i) + 1n) % interval !== 0n ? 1n : 0n));
    }
    return configFlags(cfg, "no_rope_layers", given, n);
  }

  /** build_smollm3 */
  function buildSmollm3(cfg) {
    const n = numLayers(cfg), headDim = headDimOf(cfg);
    const flags = ropeFlags(cfg, n);
    const scale = Math.pow(Number(headDim), -0.5);
    const rope = rotary(cfg, headDim, headDim, flatRope(cfg), { softmaxScale: scale });
    const nope = plainLayer("nope", scale);
    return flags.map((flag) => (truthy(flag) ? rope : nope));
  }

  /** build_cohere2 */
  function buildCohere2(cfg) {
    const headDim = headDimOf(cfg);
    const every = get(cfg, "layer_types") === null ? count(cfg, "sliding_window_pattern", 4n) : 1n;
    const kinds = layerTypes(cfg, NESTED, every, "sliding_attention");
    const scale = Math.pow(Number(headDim), -0.5);
    const rope = rotary(cfg, headDim, headDim, flatRope(cfg), { style: "interleaved", softmaxScale: scale });
    const nope = plainLayer("nope", scale);
    return kinds.map((kind) => (kind === "sliding_attention" ? rope : nope));
  }

  /** build_glm4 */
  function buildGlm4(cfg) {
    const params = flatRope(cfg);
    return buildRope(cfg, { params, rotaryFraction: partial(cfg, 0.5), style: "interleaved" });
  }

  /** build_glm4_moe */
  function buildGlm4Moe(cfg) {
    const params = flatRope(cfg);
    return buildRope(cfg, { params, rotaryFraction: partial(cfg, 0.5) });
  }

  /** build_qwen3_next */
  function buildQwen3Next(cfg) {
    const headDim = headDimOf(cfg);
    const every = get(cfg, "layer_types") === null ? count(cfg, "full_attention_interval", 4n) : 1n;
    const kinds = layerTypes(cfg, ["full_attention", "linear_attention"], every, "linear_attention");
    const rotaryDim = fractionOf(headDim, partial(cfg, 0.25));
    const scale = Math.pow(Number(headDim), -0.5);
    const rope = rotary(cfg, headDim, rotaryDim, flatRope(cfg), { softmaxScale: scale });
    const recurrent = plainLayer("recurrence", scale);
    return kinds.map((kind) => (kind === "full_attention" ? rope : recurrent));
  }

  /** build_llama4 */
  function buildLlama4(cfg) {
    if (isDict(get(cfg, "text_config"))) cfg = new Map([["model_type", "llama4_text"], ...cfg.get("text_config")]);
    const n = count(cfg, "num_hidden_layers", null, MAX_LAYERS);
    count(cfg, "num_attention_heads");
    const headDim = checkEvenDim("config['head_dim']", count(cfg, "head_dim", null, MAX_HEAD_DIM));
    count(cfg, "no_rope_layer_interval"); // read whether or not no_rope_layers is given
    const flags = ropeFlags(cfg, n);
    const params = flatRope(cfg);
    let temperature = null;
    if (configBool(cfg, "attn_temperature_tuning", true)) {
      temperature = ["floor_scale", "attn_scale"].map((key) => configNumber(cfg, key, field(cfg, key)));
    }
    const scale = Math.pow(Number(headDim), -0.5);
    return flags.map((flag) =>
      truthy(flag) ? rotaryLayer({ rotaryDim: headDim, ropeParameters: params, style: "complex", softmaxScale: scale, headDim }) : plainLayer("nope", scale, temperature)
    );
  }

  /** deepseek_softmax_scale (with _yarn_mscale) */
  function deepseekSoftmaxScale(qkHeadDim, params) {
    let scale = Math.pow(Number(qkHeadDim), -0.5);
    const type = params.has("rope_type") ? params.get("rope_type") : "default";
    if (type !== "default" && truthy(get(params, "mscale_all_dim"))) {
      const factor = params.get("factor"), weight = toFloat(params.get("mscale_all_dim"));
      const m = le(factor, 1n) ? 1.0 : 0.1 * weight * mathLog(factor) + 1.0;
      scale = scale * m * m;
    }
    return scale;
  }

  /** build_deepseek */
  function buildDeepseek(cfg) {
    const modelType = get(cfg, "model_type");
    const n = count(cfg, "num_hidden_layers", null, MAX_LAYERS);
    count(cfg, "num_attention_heads");
    const nope = count(cfg, "qk_nope_head_dim", null, MAX_HEAD_DIM);
    const rope = checkEvenDim("config['qk_rope_head_dim']", count(cfg, "qk_rope_head_dim", null, MAX_HEAD_DIM));
    const params = flatRope(cfg);
    let style;
    if (modelType === "deepseek_v2") style = "complex";
    else if (modelType === "deepseek_v32") style = "deinterleave";
    else style = configBool(cfg, "rope_interleave", true) ? "deinterleave" : "half";
    ropeInvFreq(rope, params, null);
    const scale = deepseekSoftmaxScale(nope + rope, params);
    const layer = rotaryLayer({ kind: "mla_rope", rotaryDim: rope, ropeParameters: params, style, softmaxScale: scale, headDim: nope + rope });
    return repeat(layer, n); // one per layer, alike
  }

  /** build_alibi */
  function buildAlibi(cfg) {
    const modelType = get(cfg, "model_type");
    const n = count(cfg, "num_hidden_layers", null, MAX_LAYERS);
    const heads = count(cfg, "num_attention_heads"), hidden = count(cfg, "hidden_size");
    let scale = null;
    if (modelType === "mpt") {
      count(cfg, "max_seq_len");
      scale = get(configMapping(cfg, "attn_config", get(cfg, "attn_config")), "softmax_scale");
    }
    if (hidden % heads) throw valueError(`hidden size ${hidden} must be divisible by the ${heads} heads`);
    scale = scale !== null ? configNumber(cfg, "softmax_scale", scale) : 1 / Math.sqrt(trueDiv(hidden, heads));
    return repeat(plainLayer("alibi", scale), n);
  }

  /** build_t5 (with posenc.t5._check_buckets, causal) */
  function buildT5(cfg) {
    const decoder = get(cfg, "num_decoder_layers") !== null ? "num_decoder_layers" : "num_hidden_layers";
    const n = count(cfg, decoder, null, MAX_LAYERS);
    count(cfg, "num_attention_heads");
    const buckets = count(cfg, "relative_attention_num_buckets");
    const maxDistance = count(cfg, "relative_attention_max_distance");
    if (buckets < 2n) {
      throw valueError(
        "num_buckets must be >= 2 with bidirectional=False (each direction needs an exact " +
          `bucket and a logarithmic one), got ${buckets}`
      );
    }
    const exact = buckets / 2n;
    if (maxDistance <= exact) {
      throw valueError(
        `max_distance must be larger than the ${exact} exact buckets (distances 0..${exact - 1n}) that ` +
          `num_buckets=${buckets} gives, got ${maxDistance}`
      );
    }
    count(cfg, "d_kv", null, MAX_HEAD_DIM);
    return repeat(plainLayer("t5", 1.0), n);
  }

  /** FAMILIES */
  const FAMILIES = {
    llama: buildRope, mistral: buildRope, qwen2: buildRope, qwen3: buildRope, phi3: buildPhi3, gpt_neox: buildGptNeox,
    gptj: buildGptj, gemma3: buildGemma3, gemma3_text: buildGemma3, qwen2_vl: buildQwen2Vl, qwen2_vl_text: buildQwen2Vl,
    falcon: buildFalcon, llama4: buildLlama4, llama4_text: buildLlama4, deepseek_v2: buildDeepseek, deepseek_v3: buildDeepseek,
    kimi_k2: buildDeepseek, // Kimi K2's config.json: DeepseekV3Config through its auto_map
    bloom: buildAlibi, mpt: buildAlibi, t5: buildT5, gpt_oss: buildGptOss, smollm3: buildSmollm3, cohere2: buildCohere2,
    glm4: buildGlm4, glm4_moe: buildGlm4Moe, qwen3_next: buildQwen3Next, deepseek_v32: buildDeepseek,
  };

  // ---------------------------------------------------------------------------------------------
  // posenc.hf.reader: from_hf_config, describe, format_description
  // ---------------------------------------------------------------------------------------------

  /** from_hf_config and describe: the rows of a parsed configuration. */
  function describeConfig(cfg) {
    const modelType = get(cfg, "model_type");
    if (!isStr(modelType) || !Object.prototype.hasOwnProperty.call(FAMILIES, modelType)) {
      throw valueError(`model_type ${r80(modelType)} is not supported; supported: ${sortedStrings(Object.keys(FAMILIES)).join(", ")}`);
    }
    return FAMILIES[modelType](cfg).map((row, index) => ({ layer: index, ...row }));
  }

  const COLUMNS = ["scheme", "theta", "scaling", "rotary", "layout", "nope_temperature", "softmax_scale"];
  const HEADERS = ["layers", "scheme", "theta", "scaling", "rotary", "layout", "nope temp", "softmax scale"];

  /** _cell */
  function cell(value) {
    if (value === null) return "-";
    if (isFloat(value)) return formatG(value);
    return str(value);
  }

  /** _period: the smallest p with row i equal to row i - p (the prefix function of KMP). */
  function period(keys) {
    const border = new Array(keys.length).fill(0);
    for (let i = 1; i < keys.length; i++) {
      let b = border[i - 1];
      while (b && keys[i] !== keys[b]) b = border[b - 1];
      border[i] = b + (keys[i] === keys[b] ? 1 : 0);
    }
    return keys.length - border[keys.length - 1];
  }

  /** format_description */
  function formatDescription(rows) {
    if (!rows.length) return "(no layers)";
    const cells = rows.map((row) => COLUMNS.map((column) => cell(row[column])));
    const keys = cells.map((c) => JSON.stringify(c));
    const runs = [];
    rows.forEach((row, i) => {
      if (runs.length && runs[runs.length - 1][2] === keys[i]) runs[runs.length - 1][1] = row.layer;
      else runs.push([row.layer, row.layer, keys[i], cells[i]]);
    });
    const table = [HEADERS, ...runs.map(([a, b, , c]) => [a === b ? `${a}` : `${a}-${b}`, ...c])];
    const length = (s) => Array.from(s).length;
    const widths = HEADERS.map((_, i) => Math.max(...table.map((line) => length(line[i]))));
    const pad = (s, w) => s + " ".repeat(Math.max(0, w - length(s)));
    const lines = table.map((line) => line.map((c, i) => pad(c, widths[i])).join("  ").replace(/\s+$/u, ""));
    lines.splice(1, 0, widths.map((w) => "-".repeat(w)).join("  "));
    const p = period(keys);
    if (p > 1 && p <= Math.floor(rows.length / 2)) lines.push(`pattern: the layers repeat every ${p} (${rows.length} layers)`);
    return lines.join("\n");
  }

  // ---------------------------------------------------------------------------------------------
  // posenc.hf.cli.main: the text the command prints
  // ---------------------------------------------------------------------------------------------

  /** _one_line: words joined by one space, cut to `limit` characters. */
  function oneLine(message, limit = 1000) {
    const words = [];
    let word = "";
    for (const ch of message) {
      if (PY_SPACE.test(ch)) {
        if (word) words.push(word);
        word = "";
      } else word += ch;
    }
    if (word) words.push(word);
    const chars = Array.from(words.join(" "));
    return chars.length <= limit ? chars.join("") : chars.slice(0, limit - 3).join("") + "...";
  }

  /** What `python -m posenc.describe NAME` prints for a file NAME holding `bytes`:
   *  {ok: true, text: the table} or {ok: false, text: "error: ..."} (the command's standard error). */
  function describeBytes(bytes, name = "config.json") {
    try {
      return { ok: true, text: formatDescription(describeConfig(configDict(bytes, name))) };
    } catch (error) {
      if (error instanceof PyError && (error.type === "ValueError" || error.type === "TypeError")) {
        return { ok: false, text: oneLine(`error: ${error.message}`) };
      }
      const type = error instanceof PyError ? error.type : error.name || "Error";
      return { ok: false, text: oneLine(`error: ${name} cannot be described: ${type}: ${error.message}`) };
    }
  }

  /** describeBytes of text (pasted), as UTF-8. */
  const describeText = (text, name = "config.json") => describeBytes(new TextEncoder().encode(text), name);

  // ---------------------------------------------------------------------------------------------
  // The page: a text area, a file input and drop zone, and the output
  // ---------------------------------------------------------------------------------------------

  function show(form, result) {
    const output = form.querySelector(".config-reader-output");
    output.textContent = result.text;
    output.classList.toggle("config-reader-error", !result.ok);
  }

  function attach(form) {
    const area = form.querySelector("textarea");
    const input = form.querySelector("input[type=file]");
    const zone = form.querySelector(".config-reader-drop");
    const read = (file) =>
      file.arrayBuffer().then((buffer) => {
        const bytes = new Uint8Array(buffer);
        area.value = new TextDecoder("utf-8").decode(bytes);
        show(form, describeBytes(bytes, file.name));
      });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      show(form, describeText(area.value));
    });
    area.addEventListener("input", () => show(form, describeText(area.value))); // the table follows the text
    show(form, describeText(area.value));
    input.addEventListener("change", () => input.files.length && read(input.files[0]));
    for (const target of [zone, area]) {
      target.addEventListener("dragover", (event) => {
        event.preventDefault();
        zone.classList.add("config-reader-dragging");
      });
      target.addEventListener("dragleave", () => zone.classList.remove("config-reader-dragging"));
      target.addEventListener("drop", (event) => {
        event.preventDefault();
        zone.classList.remove("config-reader-dragging");
        if (event.dataTransfer.files.length) read(event.dataTransfer.files[0]);
      });
    }
  }

  root.posencConfigReader = { describeBytes, describeText, formatG, repr };
  if (typeof document !== "undefined") {
    const start = () => document.querySelectorAll("form.config-reader").forEach(attach);
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }
})(typeof window !== "undefined" ? window : globalThis);
