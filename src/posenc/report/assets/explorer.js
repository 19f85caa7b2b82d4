/* posenc interactive explorer: the encodings of posenc computed in the page and drawn with plotly.js.
 *
 * Part 1 (PosencMath) ports posenc's formulas to JavaScript, function by function; each names the
 * Python function it mirrors, and tests/report/test_explorer.py checks the page's numbers against
 * posenc at float64 precision. Part 2 (model) turns the settings into the panels' data; Part 2b
 * reads a config.json's RoPE as posenc.rope_from_config does (JSON.parse only: nothing pasted
 * runs). Part 3 (the page) builds the controls (a slider and an exact number box each), the
 * presets and the paste box, draws with Plotly.react and exposes a test hook (?test=JSON).
 *
 * Shapes: n positions, d width, r rotated width (2 * pairs), h heads, L distances of the curve.
 */
(function (global) {
  "use strict";

  // ------------------------------------------------------------------ Part 1: posenc's formulas
  const TWO_PI = 2 * Math.PI;

  /** Angles reduced to [0, 2π): posenc.functional._checks.two_pi_mod (torch.remainder). */
  function twoPiMod(angle) {
    return angle - Math.floor(angle / TWO_PI) * TWO_PI;
  }

  function fail(message) {
    throw new Error(message);
  }

  /** Sinusoid frequencies [d/2]: posenc.functional.sinusoidal.sinusoidal_inv_freq.
   *  paper: base^(-2i/d) (Vaswani et al. 2017, section 3.5); tensor2tensor: base^(-i/max(d/2-1, 1))
   *  (tensor2tensor get_timing_signal_1d, fairseq SinusoidalPositionalEmbedding). */
  function sinusoidalInvFreq(dim, base, frequencies) {
    if (dim < 2 || dim % 2) fail(`the sinusoid needs an even dimension d >= 2, got ${dim}`);
    if (!(base > 1)) fail(`base must be greater than 1, got ${base}`);
    const half = dim / 2;
    const out = [];
    for (let i = 0; i < half; i++) {
      const exponent = frequencies === "tensor2tensor" ? i / Math.max(half - 1, 1) : (2 * i) / dim;
      out.push(Math.pow(base, -exponent));
    }
    return out;
  }

  /** Sinusoid rows [positions.length][2 * pairs]: posenc.functional.sinusoidal.sinusoidal_table.
   *  interleaved: (sin, cos) per pair side by side; half: every sine, then every cosine. */
  function sinusoidalTable(positions, invFreq, layout) {
    const rows = [];
    for (const p of positions) {
      const angles = invFreq.map((f) => twoPiMod(p * f));
      rows.push(pairRow(angles.map(Math.sin), angles.map(Math.cos), layout));
    }
    return rows;
  }

  /** (a_i, b_i) per pair: interleaved [a0, b0, a1, b1, ...] or half [a0, a1, ..., b0, b1, ...]. */
  function pairRow(a, b, layout) {
    if (layout === "half") return a.concat(b);
    const row = [];
    for (let i = 0; i < a.length; i++) row.push(a[i], b[i]);
    return row;
  }

  /** base^(-2i/d) for i < d/2: posenc.functional.rope_scaling.default_inv_freq (RoFormer eq. 15). */
  function defaultInvFreq(dim, base) {
    const out = [];
    for (let j = 0; j < dim; j += 2) out.push(Math.pow(base, -(j / dim)));
    return out;
  }

  function checkNtkDim(kind, dim) {
    if (dim <= 2) fail(`rope scaling '${kind}' raises the base to the power d / (d - 2) and needs d >= 4, got ${dim}`);
  }

  /** YaRN's temperature 0.1 * mscale * ln(s) + 1: rope_scaling.yarn_mscale (Peng et al. 2023, eq. 22). */
  function yarnMscale(scale, mscale) {
    return scale <= 1 ? 1 : 0.1 * (mscale === undefined ? 1 : mscale) * Math.log(scale) + 1;
  }

  /** YaRN's per-pair weight of the interpolated frequency: rope_scaling._yarn_ramp (YaRN section 3.2). */
  function yarnRamp(dim, base, original, betaFast, betaSlow, truncate) {
    const correctionDim = (turns) => (dim * Math.log(original / (turns * TWO_PI))) / (2 * Math.log(base));
    let low = correctionDim(betaFast);
    let high = correctionDim(betaSlow);
    if (truncate) {
      low = Math.floor(low);
      high = Math.ceil(high);
    }
    low = Math.max(low, 0);
    high = Math.min(high, dim - 1);
    if (low === high) high += 0.001;
    const ramp = [];
    for (let i = 0; i < Math.floor(dim / 2); i++) ramp.push(Math.min(1, Math.max(0, (i - low) / (high - low))));
    return ramp;
  }

  function need(params, kind, keys) {
    for (const key of keys) {
      if (params[key] === undefined || params[key] === null) fail(`rope scaling '${kind}' needs '${key}'`);
    }
  }

  /** RoPE frequency rules: posenc.functional.rope_scaling.ROPE_SCALINGS, with HF transformers'
   *  modeling_rope_utils (_compute_*_parameters) as their reference. Each returns
   *  {invFreq [d/2], attentionScale}; seqLen matters to dynamic and longrope. */
  const ROPE_SCALINGS = {
    default(dim, base) {
      return { invFreq: defaultInvFreq(dim, base), attentionScale: 1 };
    },
    // Position interpolation (Chen et al. 2023): rope_scaling._linear
    linear(dim, base, params) {
      need(params, "linear", ["factor"]);
      return { invFreq: defaultInvFreq(dim, base).map((f) => f / params.factor), attentionScale: 1 };
    },
    // Static NTK-aware base: base * factor^(d/(d-2)) (bloc97 2023): rope_scaling._ntk
    ntk(dim, base, params) {
      need(params, "ntk", ["factor"]);
      checkNtkDim("ntk", dim);
      return { invFreq: defaultInvFreq(dim, base * Math.pow(params.factor, dim / (dim - 2))), attentionScale: 1 };
    },
    // Dynamic NTK: rope_scaling._dynamic and dynamic_ntk_inv_freq (HF _compute_dynamic_ntk_parameters)
    dynamic(dim, base, params, seqLen) {
      need(params, "dynamic", ["factor"]);
      checkNtkDim("dynamic", dim);
      if (seqLen === undefined || seqLen === null) return { invFreq: defaultInvFreq(dim, base), attentionScale: 1 };
      need(params, "dynamic", ["original_max_position_embeddings"]);
      const original = params.original_max_position_embeddings;
      if (seqLen <= original) return { invFreq: defaultInvFreq(dim, base), attentionScale: 1 };
      const factor = params.factor;
      const scaledBase = base * Math.pow((factor * seqLen) / original - (factor - 1), dim / (dim - 2));
      return { invFreq: defaultInvFreq(dim, scaledBase), attentionScale: 1 };
    },
    // YaRN, NTK-by-parts plus temperature (Peng et al. 2023, sections 3.2-3.4): rope_scaling._yarn
    yarn(dim, base, params) {
      need(params, "yarn", ["factor", "original_max_position_embeddings"]);
      const factor = params.factor;
      const betaFast = params.beta_fast === undefined ? 32 : params.beta_fast;
      const betaSlow = params.beta_slow === undefined ? 1 : params.beta_slow;
      if (!(betaFast > betaSlow)) fail(`rope scaling 'yarn': beta_fast (${betaFast}) must exceed beta_slow (${betaSlow})`);
      let attention = params.attention_factor;
      if (attention === undefined || attention === null) {
        attention =
          params.mscale && params.mscale_all_dim
            ? yarnMscale(factor, params.mscale) / yarnMscale(factor, params.mscale_all_dim)
            : yarnMscale(factor);
      }
      const truncate = params.truncate === undefined ? true : params.truncate;
      const ramp = yarnRamp(dim, base, params.original_max_position_embeddings, betaFast, betaSlow, truncate);
      const invFreq = defaultInvFreq(dim, base).map((f, i) => (f / factor) * ramp[i] + f * (1 - ramp[i]));
      return { invFreq, attentionScale: attention };
    },
    // Llama 3.1 band-wise scaling: rope_scaling._llama3 (Meta llama-models apply_scaling)
    llama3(dim, base, params) {
      need(params, "llama3", ["factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"]);
      const { factor, original_max_position_embeddings: original } = params;
      const low = params.low_freq_factor;
      const high = params.high_freq_factor;
      if (!(high >= low)) fail(`rope scaling 'llama3': high_freq_factor (${high}) must be >= low_freq_factor (${low})`);
      const invFreq = defaultInvFreq(dim, base).map((f) => {
        const wavelength = TWO_PI / f;
        let scaled = f;
        if (high > low) {
          const smooth = Math.min(1, Math.max(0, (original / wavelength - low) / (high - low)));
          scaled = wavelength < original / high ? f : ((1 - smooth) * f) / factor + smooth * f;
        }
        return wavelength > original / low ? f / factor : scaled;
      });
      return { invFreq, attentionScale: 1 };
    },
    // LongRoPE per-pair factors (Ding et al. 2024; Phi-3): rope_scaling._longrope
    longrope(dim, base, params, seqLen) {
      need(params, "longrope", ["short_factor", "long_factor", "original_max_position_embeddings"]);
      const original = params.original_max_position_embeddings;
      const which = seqLen !== undefined && seqLen !== null && seqLen > original ? "long_factor" : "short_factor";
      const factors = params[which];
      if (factors.length !== Math.floor(dim / 2)) {
        fail(`rope scaling 'longrope': ${which} must have d/2 = ${Math.floor(dim / 2)} entries, got ${factors.length}`);
      }
      let attention = params.attention_factor;
      if (attention === undefined || attention === null) {
        need(params, "longrope", ["factor"]);
        attention = params.factor <= 1 ? 1 : Math.sqrt(1 + Math.log(params.factor) / Math.log(original));
      }
      return { invFreq: defaultInvFreq(dim, base).map((f, i) => f / factors[i]), attentionScale: attention };
    },
    // Proportional RoPE (Gemma 4): rope_scaling._proportional
    proportional(dim, base, params) {
      const fraction = params.partial_rotary_factor === undefined ? 1 : params.partial_rotary_factor;
      const factor = params.factor === undefined ? 1 : params.factor;
      const rotated = Math.floor((fraction * dim) / 2);
      const invFreq = defaultInvFreq(dim, base).map((f, i) => (i < rotated ? f : 0) / factor);
      return { invFreq, attentionScale: 1 };
    },
  };

  /** Rules that take an odd rotated width: rope_scaling.ODD_WIDTH_SCALINGS (GPT-NeoX's odd
   *  int(head_dim * rotary_pct): (r + 1) / 2 frequencies base^(-2i/r)). */
  const ODD_WIDTH_SCALINGS = ["default", "linear", "ntk", "dynamic", "llama3"];

  /** posenc.functional.rope.rope_inv_freq: {invFreq, attentionScale} for a rope_scaling dict. */
  function ropeInvFreq(dim, base, scaling, seqLen) {
    if (!(base > 1)) fail(`base must be greater than 1, got ${base}`);
    const params = scaling || {};
    const kind = params.rope_type || "default";
    if (!(kind in ROPE_SCALINGS)) fail(`unknown rope scaling '${kind}'; choose one of ${Object.keys(ROPE_SCALINGS).join(", ")}`);
    if (!(dim >= 1) || dim % 1) fail(`the rotated width must be a whole number >= 1, got ${dim}`);
    if (dim % 2 && !ODD_WIDTH_SCALINGS.includes(kind)) {
      fail(`rope scaling '${kind}' needs an even rotated width, got ${dim}; an odd width works with: ${ODD_WIDTH_SCALINGS.join(", ")}`);
    }
    return ROPE_SCALINGS[kind](dim, base, params, seqLen);
  }

  /** The rotated unit query R(p) q, q = (1, 0) in every pair, for p < n: [n][r], scaled by the
   *  attention scale. What posenc.functional.apply_rope gives with rope_cos_sin's tables: (s cos, s sin)
   *  per pair, in the interleaved (2i, 2i+1) or half (i, i + r/2) layout. */
  function ropeRows(positions, invFreq, layout, scale) {
    const rows = [];
    for (const p of positions) {
      const angles = invFreq.map((f) => twoPiMod(p * f));
      rows.push(pairRow(angles.map((a) => scale * Math.cos(a)), angles.map((a) => scale * Math.sin(a)), layout));
    }
    return rows;
  }

  /** RoFormer's relative upper bound (Su et al. 2021, section 3.4.3): mean_j |sum_{i<=j} e^{i t θ_i}|
   *  at each distance t: posenc.analysis.logits.rope_decay_bound. */
  function ropeDecayBound(invFreq, distances) {
    const out = [];
    for (const t of distances) {
      let re = 0;
      let im = 0;
      let total = 0;
      for (const f of invFreq) {
        const a = twoPiMod(t * f);
        re += Math.cos(a);
        im += Math.sin(a);
        total += Math.hypot(re, im);
      }
      out.push(total / invFreq.length);
    }
    return out;
  }

  /** ALiBi slopes [h] in float32: posenc.functional.relative.alibi_slopes (Press et al. 2022,
   *  section 3; ofirpress/attention_with_linear_biases get_slopes). */
  function alibiSlopes(numHeads, maxBias) {
    if (!(numHeads >= 1) || numHeads % 1) fail(`ALiBi needs a whole number of heads >= 1, got ${numHeads}`);
    const powerOfTwo = (n) => {
      const start = Math.pow(2, -maxBias / n);
      return Array.from({ length: n }, (_, i) => Math.pow(start, i + 1));
    };
    const closest = Math.pow(2, Math.floor(Math.log2(numHeads)));
    let slopes = powerOfTwo(closest);
    if (closest < numHeads) {
      slopes = slopes.concat(powerOfTwo(2 * closest).filter((_, i) => i % 2 === 0).slice(0, numHeads - closest));
    }
    return slopes.map(Math.fround);
  }

  /** ALiBi's bias of head slope m for a query at q and a key at k, in float32 as posenc computes it:
   *  -m (q - k) (causal) or -m |q - k| (bidirectional): posenc.functional.relative.alibi_bias. */
  function alibiBias(slope, q, k, bidirectional) {
    const distance = bidirectional ? Math.abs(k - q) : q - k;
    return Math.fround(-slope * distance);
  }

  /** T5's bucket of a relative position (key minus query): posenc.functional.relative.t5_relative_bucket
   *  (Raffel et al. 2020, section 2.1; HF T5Attention._relative_position_bucket), with its float32 log. */
  function t5Bucket(relative, bidirectional, numBuckets, maxDistance) {
    let half = numBuckets;
    let bucket = 0;
    let distance;
    if (bidirectional) {
      half = Math.floor(numBuckets / 2);
      bucket = relative > 0 ? half : 0;
      distance = Math.abs(relative);
    } else {
      distance = Math.max(-relative, 0);
    }
    const maxExact = Math.floor(half / 2);
    if (distance < maxExact) return bucket + distance;
    const f = Math.fround;
    const logRatio = f(f(Math.log(f(Math.max(distance, 1) / maxExact))) / f(Math.log(maxDistance / maxExact)));
    const large = maxExact + Math.trunc(f(logRatio * (half - maxExact)));
    return bucket + Math.min(large, half - 1);
  }

  function checkT5(numBuckets, maxDistance, bidirectional) {
    const least = bidirectional ? 4 : 2;
    if (numBuckets < least) fail(`T5 needs at least ${least} buckets when bidirectional=${bidirectional}, got ${numBuckets}`);
    const maxExact = Math.floor((bidirectional ? Math.floor(numBuckets / 2) : numBuckets) / 2);
    if (maxDistance <= maxExact) fail(`T5's max_distance must exceed its ${maxExact} exact buckets, got ${maxDistance}`);
  }

  // ------------------------------------------------------------------ Part 2: the panels' data
  /** E E^T [n][n]: posenc.analysis.dot_matrix. */
  function dotMatrix(rows) {
    const typed = rows.map((row) => Float64Array.from(row));
    const gram = rows.map(() => new Array(rows.length));
    for (let i = 0; i < typed.length; i++) {
      for (let j = 0; j <= i; j++) gram[i][j] = gram[j][i] = dot(typed[i], typed[j]); // symmetric: half the work
    }
    return gram;
  }

  function dot(a, b) {
    let sum = 0;
    for (let i = 0; i < a.length; i++) sum += a[i] * b[i];
    return sum;
  }

  /** 1 - cos(angle) [n][n], 0 on the diagonal and below 1e-12, from the dot products [n][n]:
   *  posenc.analysis.cosine_distance_matrix. */
  function cosineDistanceMatrix(gram) {
    const norms = gram.map((row, i) => Math.sqrt(row[i]));
    return gram.map((row, i) =>
      row.map((product, j) => {
        if (norms[i] === 0 || norms[j] === 0) return NaN;
        if (i === j) return 0;
        const distance = Math.min(2, Math.max(0, 1 - product / (norms[i] * norms[j])));
        return distance < 1e-12 ? 0 : distance;
      }),
    );
  }

  function arange(n, start) {
    return Array.from({ length: n }, (_, i) => i + (start || 0));
  }

  /** The curve's distances 0 <= t < L: every one up to CURVE_POINTS, else every k-th (k = ceil(L / CURVE_POINTS)),
   *  which keeps a long curve fast to compute and draw. */
  const CURVE_POINTS = 4096;
  function curveDistances(L) {
    const stride = Math.ceil(L / CURVE_POINTS);
    return arange(Math.ceil(L / stride)).map((i) => i * stride);
  }

  function strideNote(distances) {
    return distances.length > 1 && distances[1] > 1 ? ` (every ${distances[1]}th)` : "";
  }

  /** Up to 12 pairs spread over [0, pairs): the clock's hands. */
  function clockPairs(pairs) {
    if (pairs <= 12) return arange(pairs);
    return Array.from(new Set(arange(12).map((k) => Math.round((k * (pairs - 1)) / 11))));
  }

  function clockData(invFreq, position) {
    const pairs = clockPairs(invFreq.length);
    const angles = pairs.map((i) => twoPiMod(position * invFreq[i]));
    return {
      position,
      pairs,
      sin: angles.map(Math.sin),
      cos: angles.map(Math.cos),
      wavelengths: pairs.map((i) => (invFreq[i] > 0 ? TWO_PI / invFreq[i] : Infinity)),
    };
  }

  /** The rope_scaling dict of the page's settings (Hugging Face keys). Optional keys left unset
   *  (null) are left out, as a config.json without them; longrope's factor lists are the settings'
   *  own (from a preset or a pasted config), else made up for the page (short: all 1; long: rising
   *  linearly from 1 to factor over the pairs). */
  function scalingOf(s) {
    const kind = s.scaling;
    const params = { rope_type: kind };
    const pairs = Math.ceil(rotaryDim(s) / 2);
    if (kind !== "default") params.factor = s.factor;
    if (["dynamic", "yarn", "llama3", "longrope"].includes(kind)) params.original_max_position_embeddings = s.original;
    if (kind === "yarn") {
      Object.assign(params, { beta_fast: s.betaFast, beta_slow: s.betaSlow });
      if (s.mscale !== null && s.mscale !== undefined) params.mscale = s.mscale;
      if (s.mscaleAllDim !== null && s.mscaleAllDim !== undefined) params.mscale_all_dim = s.mscaleAllDim;
      if (s.truncate === false) params.truncate = false;
    }
    if ((kind === "yarn" || kind === "longrope") && s.attentionFactor !== null && s.attentionFactor !== undefined) {
      params.attention_factor = s.attentionFactor;
    }
    if (kind === "llama3") Object.assign(params, { low_freq_factor: s.lowFreq, high_freq_factor: s.highFreq });
    if (kind === "proportional") params.partial_rotary_factor = s.partial;
    if (kind === "longrope") {
      params.short_factor = s.shortFactor || arange(pairs).map(() => 1);
      params.long_factor = s.longFactor || arange(pairs).map((i) => 1 + ((s.factor - 1) * i) / Math.max(pairs - 1, 1));
    }
    return params;
  }

  /** The rotated width r: int(d * partial_rotary_factor) as transformers computes it (posenc
   *  RopeConfig.rotary_dim); proportional RoPE spans the whole head and zeroes frequencies instead. */
  function rotaryDim(s) {
    if (s.scaling === "proportional") return s.dim;
    const share = s.partial === undefined || s.partial === null ? 1 : s.partial;
    return Math.trunc(s.dim * share);
  }

  /** A number as JavaScript writes it: the shortest text that reads back as the same float64. */
  const exact = (x) => (Number.isFinite(x) ? String(x) : x > 0 ? "∞" : String(x));

  /** A rope_scaling dict as short text: each list as its length, first and last entries. */
  function brief(scaling) {
    const parts = Object.entries(scaling).map(([key, value]) =>
      `"${key}": ${Array.isArray(value) ? `[${value.length} numbers: ${fmt(value[0])} … ${fmt(value[value.length - 1])}]` : JSON.stringify(value)}`);
    return `{${parts.join(", ")}}`;
  }

  /** Each pair's frequency and wavelength 2π / frequency, exact (a zero frequency never turns: ∞). */
  function frequencyTable(symbol, invFreq, note) {
    return {
      caption: `${invFreq.length} frequencies ${symbol}_i and wavelengths λ_i = 2π / ${symbol}_i${note ? `; ${note}` : ""}`,
      header: ["i", `${symbol}_i`, "λ_i"],
      rows: invFreq.map((f, i) => [String(i), exact(f), f > 0 ? exact(TWO_PI / f) : "∞"]),
    };
  }

  const fmt = (x) => Number.isInteger(x) && Math.abs(x) < 1e7 ? String(x) : (Math.abs(x) >= 1e6 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(2) : String(+x.toPrecision(4)));

  function sinusoidalModel(s) {
    const invFreq = sinusoidalInvFreq(s.dim, s.base, s.frequencies);
    const rows = sinusoidalTable(arange(s.positions), invFreq, s.layout);
    const gram = dotMatrix(rows);
    const distances = curveDistances(s.curveLength);
    const origin = sinusoidalTable([0], invFreq, s.layout)[0];
    const long = sinusoidalTable(distances, invFreq, s.layout);
    return {
      table: frequencyTable("ω", invFreq),
      summary: `PE(p) = sin/cos(p · ω_i), ω_i = ${s.frequencies === "paper" ? "base^(-2i/d)" : "base^(-i/(d/2-1))"}; wavelengths ${fmt(TWO_PI / invFreq[0])} … ${fmt(TWO_PI / invFreq[invFreq.length - 1])} positions`,
      code: { z: rows, title: `PE: ${s.positions} positions × ${s.dim} features (${s.layout})`, x: "feature", y: "position", diverging: true, unit: "PE value",
        help: "Each row is the code added to the token at that position: fast waves on the left, slow ones on the right." },
      dot: { z: gram, title: "PE(m) · PE(n)", unit: "dot product", help: "A sum of cos((m − n) ω_i): it depends only on m − n, and is largest on the diagonal.", diverging: true },
      cosine: { z: cosineDistanceMatrix(gram), title: "cosine distance 1 − cos ∠(PE(m), PE(n))", unit: "cosine distance", help: "0 on the diagonal; nearby positions are close, far ones spread out." },
      clock: Object.assign(clockData(invFreq, s.clockPosition), {
        help: "Each sin/cos pair is a hand (x = sin, y = cos): 12 o'clock at position 0, turning clockwise, fast pairs first." }),
      curve: { x: distances, lines: [{ name: "PE(t) · PE(0)", y: long.map((row) => dot(row, origin)) }],
        title: "dot product against distance", xlabel: `distance t (positions t and 0)${strideNote(distances)}`, ylabel: "PE(t) · PE(0)",
        help: "The similarity of two codes falls, with ripples, as the positions move apart." },
    };
  }

  function ropeModel(s) {
    const scaling = scalingOf(s);
    const rotated = rotaryDim(s);
    const { invFreq, attentionScale } = ropeInvFreq(rotated, s.base, scaling, s.curveLength);
    const rows = ropeRows(arange(s.positions), invFreq, s.layout, attentionScale);
    const gram = dotMatrix(rows);
    const pairs = invFreq.length;
    const distances = curveDistances(s.curveLength);
    const meanCos = (freqs, scale) =>
      distances.map((t) => (scale * scale * freqs.reduce((sum, f) => sum + Math.cos(twoPiMod(t * f)), 0)) / pairs);
    const lines = [{ name: `${scaling.rope_type}: mean of s² cos(t θ_i)`, y: meanCos(invFreq, attentionScale) },
      { name: `${scaling.rope_type}: RoFormer bound (right axis)`, y: ropeDecayBound(invFreq, distances), dash: "dot", right: true }];
    if (scaling.rope_type !== "default") {
      lines.push({ name: "default: mean of cos(t θ_i)", y: meanCos(defaultInvFreq(rotated, s.base), 1), grey: true });
    }
    const marks = scaling.original_max_position_embeddings ? [{ x: scaling.original_max_position_embeddings, name: "original length" }] : [];
    return {
      summary: `${rotated < s.dim ? `${rotated} of ${s.dim} features rotate; ` : ""}θ_i: wavelengths ${fmt(TWO_PI / invFreq[0])} … ${invFreq[pairs - 1] > 0 ? fmt(TWO_PI / invFreq[pairs - 1]) : "∞"} positions; attention scale s = ${fmt(attentionScale)}; frequencies for a sequence of ${s.curveLength}`,
      frequencies: { invFreq, attentionScale, rotated, scaling },
      table: frequencyTable("θ", invFreq, `attention factor s = ${exact(attentionScale)}; rope_scaling ${brief(scaling)}${
        scaling.rope_type === "longrope" ? ` (${s.curveLength > scaling.original_max_position_embeddings ? "long" : "short"}_factor in force at L = ${s.curveLength})` : ""}`),
      code: { z: rows, title: `R(p) q for q = (1, 0) per pair: ${s.positions} × ${2 * pairs} (${s.layout})`, x: "feature", y: "position", diverging: true, unit: "rotated q",
        help: "The query rotated to each position: (s cos pθ_i, s sin pθ_i) per pair." },
      dot: { z: gram, title: "R(m)q · R(n)q: the score of equal content", unit: "logit", help: "Equals s² Σ cos((m − n) θ_i): it depends only on m − n.", diverging: true },
      cosine: { z: cosineDistanceMatrix(gram), title: "cosine distance between rotated queries", unit: "cosine distance", help: "1 − cos of the angle between R(m)q and R(n)q." },
      clock: Object.assign(clockData(invFreq, s.clockPosition), {
        help: "Each pair turns by p θ_i (x = sin, y = cos, 12 o'clock at 0); scalings slow the long-wavelength hands." }),
      curve: { x: distances, lines, marks, title: "logit against distance", xlabel: `distance t (query at t, key at 0)${strideNote(distances)}`,
        ylabel: "logit / pairs", ylabel2: "bound mean_j |S_j|", help: "The score of equal content per pair, RoFormer's decay bound and, grey, unscaled RoPE." },
    };
  }

  function alibiModel(s) {
    const slopes = alibiSlopes(s.heads, s.maxBias);
    const distances = curveDistances(s.curveLength);
    const head = Math.min(s.head, s.heads - 1);
    const perHead = slopes.map((m) => arange(s.positions).map((t) => alibiBias(m, t, 0, s.bidirectional)));
    // causal: the keys after the query are masked (null), as the causal mask ALiBi is meant for removes them
    const matrix = arange(s.positions).map((q) =>
      arange(s.positions).map((k) => (!s.bidirectional && k > q ? null : alibiBias(slopes[head], q, k, s.bidirectional))));
    return {
      table: { caption: `${s.heads} slopes m_h (float32, as posenc computes them)`, header: ["head h", "slope m_h"],
        rows: slopes.map((m, h) => [String(h), exact(m)]) },
      summary: `slopes m_h = ${slopes.slice(0, 4).map(fmt).join(", ")}${s.heads > 4 ? ", …" : ""} (geometric, last ${fmt(slopes[slopes.length - 1])})`,
      code: { z: perHead, title: `bias −m_h t: ${s.heads} heads × ${s.positions} distances`, x: "distance t (query at t, key at 0)", y: "head", diverging: true, unit: "bias",
        help: "ALiBi has no code per position: it adds this penalty to the logit, steeper for the first heads." },
      dot: { z: matrix, title: `bias of head ${head} (m = ${fmt(slopes[head])})`, x: "key position", y: "query position", diverging: true, unit: "bias",
        help: s.bidirectional ? "Symmetric: −m |q − k|." : "−m (q − k) for the keys up to the query; the causal mask removes the keys after it (blank)." },
      cosine: null,
      clock: null,
      curve: { x: distances, lines: slopes.map((m, h) => ({ name: `head ${h}`, y: distances.map((t) => alibiBias(m, t, 0, s.bidirectional)) })),
        title: "bias against distance, one line per head", xlabel: `distance t (query at t, key at 0)${strideNote(distances)}`, ylabel: "bias added to the logit",
        help: "Straight lines: the penalty grows with distance at every length, seen or not in training." },
      none: "ALiBi has no code per position: no cosine distance or clock to draw.",
    };
  }

  function t5Model(s) {
    checkT5(s.numBuckets, s.maxDistance, s.bidirectional);
    const matrix = arange(s.positions).map((q) => arange(s.positions).map((k) => t5Bucket(k - q, s.bidirectional, s.numBuckets, s.maxDistance)));
    const reach = Math.min(s.curveLength, 2 * s.maxDistance); // as posenc.analysis.t5_bucket_map: ±2 max_distance
    const relative = arange(2 * reach + 1, -reach);
    const half = s.bidirectional ? Math.floor(s.numBuckets / 2) : s.numBuckets;
    return {
      table: { caption: `bucket of each relative position k − q in [−${reach}, ${reach}]`, header: ["k − q", "bucket"],
        rows: relative.map((r) => [String(r), String(t5Bucket(r, s.bidirectional, s.numBuckets, s.maxDistance))]) },
      summary: `${Math.floor(half / 2)} exact buckets${s.bidirectional ? " per side" : ""}, then logarithmic up to ${s.maxDistance}; the bias is a learned number per bucket and head`,
      code: { z: matrix, title: `bucket of every (query, key): ${s.positions} × ${s.positions}`, x: "key position", y: "query position", unit: "bucket",
        help: "Each cell's bias is the learned value of its bucket: exact near the diagonal, coarse far from it." },
      dot: null,
      cosine: null,
      clock: null,
      curve: { x: relative, lines: [{ name: "bucket", y: relative.map((r) => t5Bucket(r, s.bidirectional, s.numBuckets, s.maxDistance)), steps: true }],
        marks: (s.bidirectional ? [-1, 1] : [-1]).map((side) => ({ x: side * s.maxDistance, name: "max_distance" })), title: "bucket against relative position", xlabel: "relative position k − q",
        ylabel: "bucket", help: "Every distance past max_distance shares the last bucket of its side." },
      none: "T5 has no code per position and its bias is a trained table: only its buckets are drawn.",
    };
  }

  const MODELS = { sinusoidal: sinusoidalModel, rope: ropeModel, alibi: alibiModel, t5: t5Model };

  /** The five panels' data for a complete settings object (see DEFAULTS). */
  function compute(settings) {
    const s = Object.assign({}, DEFAULTS, settings);
    if (!(s.scheme in MODELS)) fail(`unknown scheme '${s.scheme}'; choose one of ${Object.keys(MODELS)}`);
    if (!(s.positions >= 2)) fail(`the number of positions must be at least 2, got ${s.positions}`);
    s.clockPosition = Math.min(s.clockPosition, s.positions - 1);
    return MODELS[s.scheme](s);
  }

  const DEFAULTS = {
    scheme: "rope", dim: 64, base: 10000, positions: 128, curveLength: 2048, clockPosition: 40,
    layout: "half", frequencies: "paper", scaling: "default", factor: 4, original: 256,
    betaFast: 32, betaSlow: 1, mscale: null, mscaleAllDim: null, attentionFactor: null, truncate: true,
    lowFreq: 1, highFreq: 4, partial: 1, shortFactor: null, longFactor: null,
    heads: 8, maxBias: 8, head: 0, bidirectional: false, numBuckets: 32, maxDistance: 128,
  };

  // ------------------------------------------------------------------ Part 2b: a config.json's RoPE
  /** posenc.config's tables (model types' pair layouts, transformers 5.24 class defaults,
   *  which types read partial_rotary_factor, ...), written into the page by posenc.report.explorer. */
  const TABLES = /*@MODEL_TABLES@*/null;

  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  /** Python's truthiness, which rope_from_config's `a or b` relies on. */
  const truthy = (v) => !(v === null || v === undefined || v === false || v === 0 || v === "" ||
    (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0));
  const isNumber = (v) => typeof v === "number" && Number.isFinite(v);
  const show = (v) => (v === undefined ? "nothing" : JSON.stringify(v));

  /** The first of `names` whose value is not null: posenc.config: _field. */
  function field(config, ...names) {
    for (const name of names) if (config[name] !== undefined && config[name] !== null) return config[name];
    return null;
  }

  function whole(name, value) {
    if (!isNumber(value) || value !== Math.trunc(value) || value < 1) {
      fail(`config field '${name}' must be a positive whole number, got ${show(value)}`);
    }
    return value;
  }

  /** The head width and where it comes from: posenc.config: _head_dim and _layer_head_dim. */
  function headDim(config, layerType) {
    if (layerType === "full_attention" && truthy(config.global_head_dim)) {
      return [whole("global_head_dim", config.global_head_dim), "global_head_dim"];
    }
    if (config.qk_rope_head_dim !== undefined && config.qk_rope_head_dim !== null) {
      return [whole("qk_rope_head_dim", config.qk_rope_head_dim), "qk_rope_head_dim (the rotated slice of each head)"];
    }
    if (truthy(config.head_dim)) return [whole("head_dim", config.head_dim), "head_dim"];
    const width = ["hidden_size", "n_embd", "d_model"].find((n) => field(config, n) !== null);
    const heads = ["num_attention_heads", "n_head"].find((n) => field(config, n) !== null);
    if (!width || !heads) {
      fail(`the config needs 'head_dim', or 'hidden_size' and 'num_attention_heads', to give the head width; it has ${Object.keys(config).sort().join(", ") || "no fields"}`);
    }
    const [w, h] = [whole(width, config[width]), whole(heads, config[heads])];
    if (w < h) fail(`config fields '${width}' = ${w} and '${heads}' = ${h} give heads of width 0; give 'head_dim'`);
    return [Math.floor(w / h), `${width} / ${heads} = ${w} / ${h}`];
  }

  /** The one rope dict that applies, and the layer types when there is one per type: posenc.config: _rope_params. */
  function ropeParams(config, layerType) {
    const scaling = config.rope_scaling;
    const parameters = config.rope_parameters;
    for (const [name, value] of [["rope_scaling", scaling], ["rope_parameters", parameters]]) {
      if (value !== undefined && value !== null && !isObject(value)) {
        fail(`config field '${name}' must be an object like {"rope_type": "linear", "factor": 4.0}, got ${show(value)}`);
      }
    }
    let table;
    const typed = TABLES.layerTyped[config.model_type];
    if (typed) { // Gemma 3's flat form: rope_scaling scales the full-attention RoPE only
      const [fullTheta, localField, localTheta] = typed;
      const nested = isNested(parameters) ? Object.assign({}, parameters) : { full_attention: Object.assign({}, parameters || {}) };
      const full = Object.assign({}, nested.full_attention || {}, scaling || {});
      if (!("rope_theta" in full)) full.rope_theta = field(config, "rope_theta") || fullTheta;
      const local = Object.assign({}, truthy(nested.sliding_attention) ? nested.sliding_attention : { rope_type: "default" });
      if (!("rope_theta" in local)) local.rope_theta = (localField ? field(config, localField) : null) || localTheta;
      table = Object.assign(nested, { full_attention: full, sliding_attention: local });
    } else {
      table = truthy(scaling) ? scaling : truthy(parameters) ? parameters : {};
    }
    if (!isNested(table)) return { params: Object.assign({}, table), layerTypes: [], layerType: null };
    const kinds = Object.keys(table).filter((k) => isObject(table[k])).sort();
    const chosen = layerType || (kinds.includes("full_attention") ? "full_attention" : kinds[0]);
    if (!kinds.includes(chosen)) fail(`unknown layer type '${chosen}'; this config's RoPEs are for: ${kinds.join(", ")}`);
    return { params: Object.assign({}, table[chosen]), layerTypes: kinds, layerType: chosen };
  }

  function isNested(params) {
    return isObject(params) && Object.values(params).some(isObject);
  }

  /** partial_rotary_factor: the rope dict's, else the config's, else the family's default: posenc.config: _partial_factor. */
  function partialFactor(config, params) {
    let factor = field(params, "partial_rotary_factor");
    if (factor === null) factor = field(config, "partial_rotary_factor", "rotary_pct");
    if (factor === null) factor = TABLES.defaultPartial[config.model_type] || 1;
    if (!isNumber(factor) || !(factor > 0 && factor <= 1)) {
      fail(`partial_rotary_factor must be a number in (0, 1], got ${show(factor)}`);
    }
    return factor;
  }

  /** The rotated width: posenc.config: _rotary_dim. */
  function rotatedWidth(config, params, head) {
    const type = config.model_type;
    if ("qk_rope_head_dim" in config) return [head, "the whole qk_rope_head_dim slice", 1];
    if ((params.rope_type || params.type) === "proportional") return [head, "the whole head (proportional zeroes frequencies)", 1];
    if (field(config, "rotary_dim") !== null && !(type in TABLES.layouts) && field(params, "partial_rotary_factor") === null) {
      const width = whole("rotary_dim", config.rotary_dim);
      if (width > head) fail(`config field 'rotary_dim' = ${width} exceeds the head width ${head}`);
      return [width, "rotary_dim", (width + 0.5) / head]; // int(head * share) = width
    }
    if (type in TABLES.layouts && !TABLES.readsPartial.includes(type)) {
      return [head, `the whole head: ${type} ignores partial_rotary_factor`, 1];
    }
    const factor = partialFactor(config, params);
    const width = Math.trunc(head * factor);
    return [width, width === head ? "the whole head" : `int(${head} × partial_rotary_factor ${factor})`, factor];
  }

  /** The keys a rope type takes, the others dropped with a note: posenc.config: _known_keys. */
  function knownKeys(kind, scaling, notes) {
    if (!(kind in TABLES.scalingKeys)) return scaling;
    const [required, optional] = TABLES.scalingKeys[kind];
    const extra = Object.keys(scaling).filter((k) => k !== "rope_type" && !required.includes(k) && !optional.includes(k)).sort();
    if (extra.length) notes.push(`rope type '${kind}' does not take ${extra.join(", ")}: left out, as posenc.rope_from_config does`);
    extra.forEach((k) => delete scaling[k]);
    return scaling;
  }

  /** The scaling dict as rope_from_config completes it (posenc.config: _scaling); null for default RoPE. */
  function completeScaling(config, params, nested, notes) {
    let kind = "rope_type" in params ? params.rope_type : "type" in params ? params.type : "default";
    if (kind === "su" || (kind === "yarn" && TABLES.yarnIsLongrope.includes(config.model_type))) kind = "longrope";
    const scaling = {};
    for (const [k, v] of Object.entries(params)) if (!["rope_theta", "partial_rotary_factor", "type"].includes(k)) scaling[k] = v;
    scaling.rope_type = kind;
    if (kind === "proportional") scaling.partial_rotary_factor = partialFactor(config, params);
    if (kind === "default") {
      knownKeys(kind, scaling, notes);
      return null;
    }
    const maxLen = config.max_position_embeddings;
    if (["llama3", "yarn", "longrope"].includes(kind)) {
      const top = nested ? null : config.original_max_position_embeddings;
      const original = truthy(top) ? top : scaling.original_max_position_embeddings;
      scaling.original_max_position_embeddings = truthy(original) ? original : maxLen;
    }
    if (kind === "dynamic") {
      if (!truthy(maxLen)) fail("rope scaling 'dynamic' rescales past max_position_embeddings, which the config lacks");
      scaling.original_max_position_embeddings = maxLen;
    }
    if ((kind === "longrope" || kind === "yarn") && (scaling.factor === undefined || scaling.factor === null) &&
        truthy(maxLen) && truthy(scaling.original_max_position_embeddings)) {
      scaling.factor = maxLen / scaling.original_max_position_embeddings;
    }
    return knownKeys(kind, scaling, notes);
  }

  const VALUE_RULES = {
    factor: [(v) => isNumber(v) && v > 0, "a positive number"],
    original_max_position_embeddings: [(v) => isNumber(v) && v > 0 && v === Math.trunc(v), "a positive whole number"],
    low_freq_factor: [(v) => isNumber(v) && v > 0, "a positive number"],
    high_freq_factor: [(v) => isNumber(v) && v > 0, "a positive number, at least low_freq_factor"],
    beta_fast: [(v) => isNumber(v) && v > 0, "a positive number greater than beta_slow"],
    beta_slow: [(v) => isNumber(v) && v > 0, "a positive number"],
    mscale: [(v) => isNumber(v) && v >= 0, "a number >= 0"],
    mscale_all_dim: [(v) => isNumber(v) && v >= 0, "a number >= 0"],
    attention_factor: [(v) => isNumber(v) && v > 0, "a positive number"],
    truncate: [(v) => typeof v === "boolean", "true or false"],
    short_factor: [(v) => Array.isArray(v) && v.length > 0 && v.every((x) => isNumber(x) && x > 0), "a list of positive numbers, one per rotated pair"],
    long_factor: [(v) => Array.isArray(v) && v.length > 0 && v.every((x) => isNumber(x) && x > 0), "a list of positive numbers, one per rotated pair"],
    partial_rotary_factor: [(v) => isNumber(v) && v > 0 && v <= 1, "a number in (0, 1]"],
  };

  /** rope_scaling.parse_scaling's checks: a known type, its required keys, each value in range;
   *  optional keys set to null are unset. */
  function checkScaling(scaling) {
    const kind = scaling.rope_type;
    if (!(kind in TABLES.scalingKeys)) {
      fail(`unknown RoPE scaling type ${show(kind)}; posenc knows: ${Object.keys(TABLES.scalingKeys).join(", ")}`);
    }
    const [required, optional] = TABLES.scalingKeys[kind];
    const missing = required.filter((k) => scaling[k] === undefined || scaling[k] === null);
    if (missing.length) fail(`rope scaling '${kind}' needs ${missing.join(", ")}; it takes ${required.concat(optional).join(", ")}`);
    for (const [key, value] of Object.entries(scaling)) {
      if (key === "rope_type") continue;
      if (value === null) {
        delete scaling[key];
        continue;
      }
      const [ok, what] = VALUE_RULES[key];
      if (!ok(value)) fail(`rope scaling '${kind}': '${key}' must be ${what}, got ${show(value)}`);
    }
    return scaling;
  }

  /** A config.json's RoPE as page settings: what posenc.rope_from_config reads, for the model types
   *  whose reading the page ports (the others are named with the reason). `config` is the parsed
   *  JSON, never executed; `layerType` picks one of per-layer-type RoPEs (full_attention by default). */
  function readConfig(config, layerType) {
    if (!isObject(config)) fail(`a config.json holds one JSON object {...}; this is ${Array.isArray(config) ? "an array" : show(config)}`);
    const text = config.text_config;
    if (text !== undefined && text !== null && !isObject(text)) fail(`config field 'text_config' must be an object, got ${show(text)}`);
    if (text && !("num_attention_heads" in config)) config = Object.assign({ model_type: config.model_type }, text);
    const type = config.model_type;
    if (type !== undefined && type !== null && typeof type !== "string") fail(`config field 'model_type' must be a name, got ${show(type)}`);
    if (type in TABLES.special) {
      fail(`model_type '${type}': ${TABLES.special[type]}; this page does not port that reading (posenc.rope_from_config does)`);
    }
    if ("per_layer_config" in config) fail("per_layer_config (head widths per layer) is read by posenc.rope_from_config, not by this page");
    config = Object.assign({}, TABLES.defaults[type] || {}, config);
    const notes = [];
    const { params, layerTypes, layerType: chosen } = ropeParams(config, layerType);
    if (params.mrope_section !== undefined && params.mrope_section !== null) {
      fail("mrope_section: multimodal RoPE (MRoPE) is read by posenc.rope_from_config, not by this page");
    }
    if ((params.rope_type || params.type) === "mrope") { // Qwen2-VL's legacy name of the default RoPE
      ["type", "mrope_interleaved", "interleaved"].forEach((k) => delete params[k]);
      params.rope_type = "default";
    }
    let base = field(params, "rope_theta");
    if (base === null) base = field(config, "rope_theta", "rotary_emb_base");
    if (base !== null && (!isNumber(base) || !(base > 1))) fail(`config field 'rope_theta' (the RoPE base) must be a number greater than 1, got ${show(base)}`);
    const [head, headFrom] = headDim(config, chosen);
    if (head % 2) fail(`the head width from ${headFrom} is ${head}, odd: RoPE rotates pairs of features`);
    const [rotated, rotatedFrom, rotatedShare] = rotatedWidth(config, params, head);
    const nested = type in TABLES.layerTyped || isNested(truthy(config.rope_scaling) ? config.rope_scaling : config.rope_parameters);
    const raw = completeScaling(config, params, nested, notes);
    const scaling = raw === null ? null : checkScaling(raw);
    let layout = null;
    if (TABLES.interleaveFlag.includes(type) && config.rope_interleave === false) layout = "half";
    else if (type in TABLES.layouts) layout = TABLES.layouts[type];
    else notes.push(`model_type ${show(type)} is not one whose pair layout posenc knows: the page keeps its own (pair layout, above)`);
    const maxLen = config.max_position_embeddings;
    return {
      headDim: head, headFrom, rotated, rotatedFrom, rotatedShare, base: base === null ? 10000 : base, baseFrom: base === null ? "posenc's default 10000" : "rope_theta",
      scaling, layout, layerTypes, layerType: chosen, maxLength: isNumber(maxLen) ? maxLen : null, notes,
    };
  }

  /** Page settings for a read config (readConfig's result); `length` overrides max_position_embeddings. */
  function settingsOf(read, length) {
    const s = { scheme: "rope", dim: read.headDim, base: read.base, shortFactor: null, longFactor: null,
      mscale: null, mscaleAllDim: null, attentionFactor: null, truncate: true };
    if (read.layout) s.layout = read.layout;
    const p = read.scaling || { rope_type: "default" };
    s.scaling = p.rope_type;
    if (p.rope_type === "proportional") s.partial = p.partial_rotary_factor === undefined ? 1 : p.partial_rotary_factor;
    else s.partial = read.rotatedShare;
    if (p.factor !== undefined) s.factor = p.factor;
    else if (p.rope_type === "proportional") s.factor = 1;
    if (p.original_max_position_embeddings !== undefined) s.original = p.original_max_position_embeddings;
    if (p.rope_type === "yarn") {
      s.betaFast = p.beta_fast === undefined ? 32 : p.beta_fast;
      s.betaSlow = p.beta_slow === undefined ? 1 : p.beta_slow;
      if (p.mscale !== undefined) s.mscale = p.mscale;
      if (p.mscale_all_dim !== undefined) s.mscaleAllDim = p.mscale_all_dim;
      if (p.truncate !== undefined) s.truncate = p.truncate;
    }
    if (p.attention_factor !== undefined) s.attentionFactor = p.attention_factor;
    if (p.rope_type === "llama3") Object.assign(s, { lowFreq: p.low_freq_factor, highFreq: p.high_freq_factor });
    if (p.rope_type === "longrope") Object.assign(s, { shortFactor: p.short_factor.slice(), longFactor: p.long_factor.slice() });
    const L = length || read.maxLength;
    if (L && L >= 2 && L <= MAX_LENGTH && L === Math.trunc(L)) s.curveLength = L;
    return s;
  }

  const MAX_LENGTH = 1048576;

  global.PosencMath = {
    twoPiMod, sinusoidalInvFreq, sinusoidalTable, defaultInvFreq, ropeInvFreq, ropeRows, ropeDecayBound,
    alibiSlopes, alibiBias, t5Bucket, dotMatrix, cosineDistanceMatrix, curveDistances, compute, scalingOf, rotaryDim, DEFAULTS, ROPE_SCALINGS,
    readConfig, settingsOf,
  };

  // ------------------------------------------------------------------ Part 3: the page
  const ALL = ["sinusoidal", "rope", "alibi", "t5"];
  const SCALED = ["linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional"];
  const WITH_ORIGINAL = ["dynamic", "yarn", "llama3", "longrope"];

  /** Round numbers for the sliders that move on a log scale: 1, 1.5, 2, 3, 5, 7 per decade (base)
   *  or 1, 2, 5 per decade and every power of two (lengths), so 2048, 8192 and 32768 are stops. */
  function stops(lo, hi, mantissas, powersOfTwo) {
    const out = new Set();
    for (let e = -1; e <= 12; e++) for (const m of mantissas) out.add(Number((m * Math.pow(10, e)).toPrecision(12)));
    if (powersOfTwo) for (let k = 0; k <= 40; k++) out.add(Math.pow(2, k));
    return Array.from(out).filter((v) => v >= lo && v <= hi).sort((a, b) => a - b);
  }
  const LENGTHS = (lo) => stops(lo, MAX_LENGTH, [1, 2, 5], true);

  // Each control: id, label, kind (select, check, range: a linear slider, stops: a slider over round
  // values, entry: a number box alone), the schemes (and rope scalings) it applies to, and what its
  // number box accepts: [min, max] (`above`: min excluded), whole, even; optional: empty means unset.
  const CONTROLS = [
    { id: "scheme", label: "scheme", kind: "select", options: ALL, schemes: ALL },
    { id: "scaling", label: "RoPE scaling (rope_type)", kind: "select", options: ["default", ...SCALED], schemes: ["rope"] },
    { id: "dim", label: "head width d (head_dim)", kind: "range", min: 2, max: 512, step: 2, accept: { min: 2, max: 1024, whole: true, even: true }, schemes: ["sinusoidal", "rope"] },
    { id: "partial", label: "partial_rotary_factor", kind: "range", min: 0.05, max: 1, step: 0.05, accept: { above: 0, max: 1 }, schemes: ["rope"] },
    { id: "base", label: "base (rope_theta)", kind: "stops", stops: stops(1.5, 1e9, [1, 1.5, 2, 3, 5, 7]), accept: { above: 1, max: 1e12 }, schemes: ["sinusoidal", "rope"] },
    { id: "positions", label: "positions n (matrices)", kind: "range", min: 4, max: 512, step: 1, accept: { min: 2, max: 512, whole: true }, schemes: ALL },
    { id: "curveLength", label: "sequence length L (curve; RoPE's frequencies)", kind: "stops", stops: LENGTHS(8), accept: { min: 2, max: MAX_LENGTH, whole: true }, schemes: ALL },
    { id: "clockPosition", label: "clock position p", kind: "range", min: 0, max: 127, step: 1, accept: { min: 0, whole: true }, schemes: ["sinusoidal", "rope"] },
    { id: "layout", label: "pair layout", kind: "select", options: ["half", "interleaved"], schemes: ["sinusoidal", "rope"] },
    { id: "frequencies", label: "sinusoid frequencies", kind: "select", options: ["paper", "tensor2tensor"], schemes: ["sinusoidal"] },
    { id: "factor", label: "factor", kind: "range", min: 1, max: 64, step: 0.5, accept: { above: 0, max: 1e4 }, schemes: ["rope"], scalings: SCALED },
    { id: "original", label: "original_max_position_embeddings", kind: "stops", stops: LENGTHS(16), accept: { min: 1, max: MAX_LENGTH, whole: true }, schemes: ["rope"], scalings: WITH_ORIGINAL },
    { id: "betaFast", label: "beta_fast (yarn)", kind: "range", min: 1, max: 64, step: 1, accept: { above: 0, max: 1e4 }, schemes: ["rope"], scalings: ["yarn"] },
    { id: "betaSlow", label: "beta_slow (yarn)", kind: "range", min: 0.25, max: 8, step: 0.25, accept: { above: 0, max: 1e4 }, schemes: ["rope"], scalings: ["yarn"] },
    { id: "mscale", label: "mscale (yarn; empty: unset)", kind: "entry", accept: { min: 0, max: 100, optional: true }, schemes: ["rope"], scalings: ["yarn"] },
    { id: "mscaleAllDim", label: "mscale_all_dim (yarn; empty: unset)", kind: "entry", accept: { min: 0, max: 100, optional: true }, schemes: ["rope"], scalings: ["yarn"] },
    { id: "truncate", label: "truncate (yarn)", kind: "check", schemes: ["rope"], scalings: ["yarn"] },
    { id: "attentionFactor", label: "attention_factor (empty: the rule's own)", kind: "entry", accept: { above: 0, max: 100, optional: true }, schemes: ["rope"], scalings: ["yarn", "longrope"] },
    { id: "lowFreq", label: "low_freq_factor (llama3)", kind: "range", min: 0.5, max: 8, step: 0.5, accept: { above: 0, max: 1e4 }, schemes: ["rope"], scalings: ["llama3"] },
    { id: "highFreq", label: "high_freq_factor (llama3)", kind: "range", min: 0.5, max: 16, step: 0.5, accept: { above: 0, max: 1e4 }, schemes: ["rope"], scalings: ["llama3"] },
    { id: "heads", label: "heads h", kind: "range", min: 1, max: 64, step: 1, accept: { min: 1, max: 256, whole: true }, schemes: ["alibi"] },
    { id: "maxBias", label: "max_bias (8 in the paper)", kind: "range", min: 1, max: 16, step: 0.5, accept: { above: 0, max: 64 }, schemes: ["alibi"] },
    { id: "head", label: "head drawn as a matrix", kind: "range", min: 0, max: 63, step: 1, accept: { min: 0, whole: true }, schemes: ["alibi"] },
    { id: "numBuckets", label: "num_buckets", kind: "range", min: 4, max: 128, step: 2, accept: { min: 2, max: 1024, whole: true }, schemes: ["t5"] },
    { id: "maxDistance", label: "max_distance", kind: "range", min: 2, max: 1024, step: 1, accept: { min: 1, max: MAX_LENGTH, whole: true }, schemes: ["t5"] },
    { id: "bidirectional", label: "bidirectional", kind: "check", schemes: ["alibi", "t5"] },
  ];

  const HELP = {
    scheme: "sinusoidal: Vaswani et al. 2017; rope: Su et al. 2021; alibi: Press et al. 2022; t5: Raffel et al. 2020.",
    scaling: "Hugging Face rope_type. longrope's factor lists come from the preset or pasted config; without one (or once the rotated width no longer fits them): short all 1, long rising from 1 to factor.",
    partial: "Share of each head that rotates: the first int(d × factor) features. For proportional RoPE the whole head rotates and the factor zeroes the frequencies past that share.",
    curveLength: "The curve's range (T5: at most 2 max_distance); dynamic and longrope take their frequencies for a sequence this long.",
  };

  // Presets: the RoPE fields of published config.json files, read by the same code as a pasted
  // config (readConfig), so each shows what posenc.rope_from_config makes of that file.
  const PHI3_LONG = [1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547, 1.2299998998641968,
    1.2299998998641968, 1.2999999523162842, 1.4499999284744263, 1.5999999046325684, 1.6499998569488525, 1.8999998569488525,
    2.859999895095825, 3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164, 9.09000015258789,
    11.579999923706055, 15.65999984741211, 15.769999504089355, 15.789999961853027, 18.360000610351562, 21.989999771118164,
    23.079999923706055, 30.009998321533203, 32.35000228881836, 32.590003967285156, 35.56000518798828, 39.95000457763672,
    53.840003967285156, 56.20000457763672, 57.95000457763672, 59.29000473022461, 59.77000427246094, 59.920005798339844,
    61.190006256103516, 61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086, 63.48000717163086,
    63.66000747680664, 63.850006103515625, 64.08000946044922, 64.760009765625, 64.80001068115234, 64.81001281738281,
    64.81001281738281];
  const PHI3_SHORT = [1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002, 1.4000000000000004,
    1.4500000000000004, 1.5500000000000005, 1.8500000000000008, 1.9000000000000008,
    ...Array(19).fill(2.000000000000001), 2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996,
    2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3999999999999995, 2.3999999999999995, 2.6499999999999986,
    2.6999999999999984, 2.8999999999999977, 2.9499999999999975, 3.049999999999997, 3.049999999999997, 3.049999999999997];
  const GEMMA3_4B = { model_type: "gemma3", text_config: { model_type: "gemma3_text", hidden_size: 2560, num_hidden_layers: 34,
    sliding_window: 1024, rope_scaling: { rope_type: "linear", factor: 8.0 } } };
  const PRESETS = [
    { id: "llama-3.1-8b", label: "Llama 3.1 8B (llama3 ×8)", name: "Llama 3.1 8B (llama3 scaling ×8)",
      source: "meta-llama/Llama-3.1-8B config.json",
      config: { model_type: "llama", hidden_size: 4096, num_attention_heads: 32, max_position_embeddings: 131072, rope_theta: 500000.0,
        rope_scaling: { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192, rope_type: "llama3" } } },
    { id: "qwen2.5-7b-yarn", label: "Qwen2.5 7B + YaRN ×4", name: "Qwen2.5 7B Instruct with YaRN ×4",
      source: "Qwen/Qwen2.5-7B-Instruct config.json with the rope_scaling block its model card adds for 131072 tokens",
      length: 131072,
      config: { model_type: "qwen2", hidden_size: 3584, num_attention_heads: 28, max_position_embeddings: 32768, rope_theta: 1000000.0,
        rope_scaling: { factor: 4.0, original_max_position_embeddings: 32768, type: "yarn" } } },
    { id: "deepseek-v3", label: "DeepSeek-V3 (YaRN ×40)", name: "DeepSeek-V3 (YaRN ×40 on the 64-wide RoPE slice)",
      source: "deepseek-ai/DeepSeek-V3 config.json",
      config: { model_type: "deepseek_v3", hidden_size: 7168, num_attention_heads: 128, qk_nope_head_dim: 128, qk_rope_head_dim: 64,
        max_position_embeddings: 163840, rope_theta: 10000,
        rope_scaling: { beta_fast: 32, beta_slow: 1, factor: 40, mscale: 1.0, mscale_all_dim: 1.0, original_max_position_embeddings: 4096, type: "yarn" } } },
    { id: "phi-3-mini-128k", label: "Phi-3 mini 128k (LongRoPE)", name: "Phi-3 mini 128k (LongRoPE)",
      source: "microsoft/Phi-3-mini-128k-instruct config.json as first published (type \"su\"); the same lists ship in Phi-3-vision-128k-instruct's config.json",
      config: { model_type: "phi3", hidden_size: 3072, num_attention_heads: 32, max_position_embeddings: 131072,
        original_max_position_embeddings: 4096, rope_theta: 10000.0, rope_scaling: { long_factor: PHI3_LONG, short_factor: PHI3_SHORT, type: "su" } } },
    { id: "gemma-3-4b-local", label: "Gemma 3 4B, local layers", name: "Gemma 3 4B, local (sliding-window) layers", layerType: "sliding_attention",
      source: "google/gemma-3-4b-it config.json (text_config); head_dim 256 and the bases 1e6 (global) and 1e4 (local) are transformers 5.24 Gemma3TextConfig's defaults",
      config: GEMMA3_4B },
    { id: "gemma-3-4b-global", label: "Gemma 3 4B, global (linear ×8)", name: "Gemma 3 4B, global layers (linear ×8)", layerType: "full_attention",
      source: "google/gemma-3-4b-it config.json (text_config); head_dim 256 and the bases 1e6 (global) and 1e4 (local) are transformers 5.24 Gemma3TextConfig's defaults",
      config: GEMMA3_4B },
    { id: "gpt-oss", label: "GPT-OSS 20B / 120B (YaRN ×32)", name: "GPT-OSS 20B / 120B (YaRN ×32, no truncation)",
      source: "openai/gpt-oss-20b config.json (the same RoPE as transformers 5.24 GptOssConfig's defaults)",
      config: { model_type: "gpt_oss", hidden_size: 2880, num_attention_heads: 64, head_dim: 64, max_position_embeddings: 131072, rope_theta: 150000,
        rope_scaling: { beta_fast: 32.0, beta_slow: 1.0, factor: 32.0, original_max_position_embeddings: 4096, rope_type: "yarn", truncate: false } } },
  ];

  const FONT = { family: "system-ui, -apple-system, Segoe UI, sans-serif", size: 13, color: "#1d2330" };
  // no mode bar (it covers the titles): drag to zoom, double-click to reset
  const CONFIG = { displayModeBar: false, responsive: true };
  const PALETTE = ["#0d0887", "#46039f", "#7201a8", "#9c179e", "#bd3786", "#d8576b", "#ed7953", "#fb9f3a", "#fdca26", "#f0f921", "#1b9e77", "#666666"];

  function layoutFor(title, xlabel, ylabel, extra) {
    return Object.assign({
      font: FONT, margin: { l: 64, r: 16, t: 36, b: 52 }, title: { text: title, font: { size: 14 } },
      xaxis: { title: { text: xlabel }, automargin: true }, yaxis: { title: { text: ylabel }, automargin: true },
      paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    }, extra || {});
  }

  function heatmap(id, panel, colours) {
    const trace = { type: "heatmap", z: panel.z, colorscale: colours || (panel.diverging ? "RdBu" : "Viridis"),
      zsmooth: false, hoverongaps: false, colorbar: { thickness: 14, title: { text: panel.unit || "value", side: "right" } } };
    if (panel.diverging) trace.zmid = 0;
    const layout = layoutFor(panel.title, panel.x || "position n", panel.y || "position m", { yaxis: { autorange: "reversed", title: { text: panel.y || "position m" } } });
    return Plotly.react(id, [trace], layout, CONFIG);
  }

  /** Ticks 0, step, 2 step, ... up to the first multiple of a round step (1, 2, 2.5 or 5 × 10^k)
   *  at or above `top`, about five of them. */
  function roundTicks(top) {
    const span = top > 0 && Number.isFinite(top) ? top : 1;
    const rough = span / 5;
    const decade = Math.pow(10, Math.floor(Math.log10(rough)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * decade).find((v) => v >= rough);
    const count = Math.ceil(span / step - 1e-9);
    const values = arange(count + 1).map((k) => Number((k * step).toPrecision(12)));
    return { values, top: values[values.length - 1] };
  }

  function curve(id, panel) {
    const traces = panel.lines.map((line, j) => ({
      type: "scatter", mode: "lines", name: line.name, x: panel.x, y: line.y, yaxis: line.right ? "y2" : "y",
      line: { width: 2, dash: line.dash || "solid", shape: line.steps ? "hv" : "linear",
        color: line.grey ? "#9aa1ad" : panel.lines.length > 3 ? PALETTE[j % 10] : ["#2456a6", "#b42318", "#9aa1ad"][j] },
    }));
    const shapes = (panel.marks || []).map((mark) => ({ type: "line", x0: mark.x, x1: mark.x, yref: "paper", y0: 0, y1: 1, line: { dash: "dot", color: "#b42318" } }));
    const annotations = (panel.marks || []).map((mark) => ({ x: mark.x, yref: "paper", y: 1, text: mark.name, showarrow: false, yanchor: "bottom", font: { size: 11, color: "#b42318" } }));
    const layout = layoutFor(panel.title, panel.xlabel, panel.ylabel, {
      shapes, annotations, legend: { orientation: "h", y: -0.25, font: { size: 11 } }, margin: { l: 64, r: 16, t: 36, b: 90 },
    });
    layout.xaxis.range = [panel.x[0], panel.x[panel.x.length - 1]]; // the marks' labels must not widen it
    if (panel.ylabel2) {
      const right = panel.lines.filter((line) => line.right).flatMap((line) => line.y);
      const ticks = roundTicks(Math.max(...right));
      layout.yaxis2 = { title: { text: panel.ylabel2, font: { color: "#b42318" } }, overlaying: "y", side: "right", showgrid: false,
        automargin: true, range: [0, ticks.top], tickmode: "array", tickvals: ticks.values, ticktext: ticks.values.map(String) };
    }
    return Plotly.react(id, traces, layout, CONFIG);
  }

  function clock(id, data) {
    const columns = Math.min(6, data.pairs.length);
    const gap = 2.7;
    const circle = arange(73).map((k) => (k * TWO_PI) / 72);
    const xs = [];
    const ys = [];
    const annotations = [];
    data.pairs.forEach((pair, j) => {
      const cx = (j % columns) * gap;
      const cy = -Math.floor(j / columns) * (gap + 0.5);
      circle.forEach((a) => { xs.push(cx + Math.sin(a)); ys.push(cy + Math.cos(a)); });
      xs.push(null);
      ys.push(null);
      const colour = PALETTE[Math.round((j * 9) / Math.max(data.pairs.length - 1, 1))];
      annotations.push({ x: cx + data.sin[j], y: cy + data.cos[j], ax: cx, ay: cy, xref: "x", yref: "y", axref: "x", ayref: "y",
        showarrow: true, arrowhead: 2, arrowsize: 1, arrowwidth: 3, arrowcolor: colour, text: "" });
      const wavelength = Number.isFinite(data.wavelengths[j]) ? fmt(data.wavelengths[j]) : "∞";
      annotations.push({ x: cx, y: cy - 1.15, text: `pair ${pair}, λ = ${wavelength}`, showarrow: false, yanchor: "top", font: { size: 12 } });
    });
    const rows = Math.ceil(data.pairs.length / columns);
    const hidden = { visible: false, fixedrange: true };
    const layout = layoutFor(`hands at position ${data.position} (x = sin, y = cos; 12 o'clock at position 0)`, "", "", {
      showlegend: false, annotations, margin: { l: 8, r: 8, t: 36, b: 8 },
      xaxis: Object.assign({ range: [-1.3, (columns - 1) * gap + 1.3] }, hidden),
      yaxis: Object.assign({ range: [-(rows - 1) * (gap + 0.5) - 1.9, 1.3], scaleanchor: "x" }, hidden),
    });
    return Plotly.react(id, [{ type: "scatter", mode: "lines", x: xs, y: ys, line: { color: "#c3c8d2", width: 1.5 }, hoverinfo: "skip" }], layout, CONFIG);
  }

  const PANELS = [
    ["code", "plot-code"], ["curve", "plot-curve"], ["dot", "plot-dot"], ["cosine", "plot-cosine"], ["clock", "plot-clock"],
  ];

  const page = {
    state: Object.assign({}, DEFAULTS),
    draws: 0,
    pending: null,
    waiting: [],
    model: null,
  };

  function visible(control, s) {
    return control.schemes.includes(s.scheme) && (!control.scalings || control.scalings.includes(s.scaling));
  }

  function element(tag, props, parent) {
    const node = Object.assign(document.createElement(tag), props || {});
    if (parent) parent.appendChild(node);
    return node;
  }

  // ---- number boxes: what a reader types is read exactly, or refused with the reason in the page
  const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

  /** The upper bound that depends on other settings (the clock's position, the head drawn). */
  function acceptOf(control, s) {
    const accept = Object.assign({}, control.accept);
    if (control.id === "clockPosition") accept.max = s.positions - 1;
    if (control.id === "head") accept.max = s.heads - 1;
    return accept;
  }

  function bound(x) {
    const power = Math.log10(x);
    return x >= 1e6 && Number.isInteger(power) ? `1e${power}` : String(x);
  }

  function describeRange(accept) {
    const parts = [accept.above !== undefined ? `greater than ${bound(accept.above)}` : `at least ${bound(accept.min)}`, `at most ${bound(accept.max)}`];
    return `${accept.even ? "an even whole number" : accept.whole ? "a whole number" : "a number"} ${parts.join(" and ")}`;
  }

  /** {value} or {error} for the text typed into a control's number box. */
  function parseEntry(control, text, s) {
    const accept = acceptOf(control, s);
    const trimmed = text.trim();
    if (trimmed === "" && accept.optional) return { value: null };
    if (!NUMBER.test(trimmed)) return { error: `${control.label}: "${text}" is not a number; enter ${describeRange(accept)}` };
    const value = Number(trimmed);
    const low = accept.above !== undefined ? value <= accept.above : value < accept.min;
    const why = accept.whole && !Number.isInteger(value) ? "is not a whole number"
      : accept.even && value % 2 !== 0 ? "is odd (features rotate in pairs)"
      : low || value > accept.max ? "is out of range" : null;
    if (why) return { error: `${control.label}: ${trimmed} ${why}; enter ${describeRange(accept)}` };
    return { value };
  }

  function sliderOf(control, value) {
    if (control.kind !== "stops") return value;
    let best = 0;
    control.stops.forEach((stop, i) => {
      if (Math.abs(Math.log(stop / value)) < Math.abs(Math.log(control.stops[best] / value))) best = i;
    });
    return best;
  }

  function fromSlider(control, raw) {
    return control.kind === "stops" ? control.stops[Number(raw)] : Number(raw);
  }

  function setError(row, message) {
    const error = row.querySelector(".error");
    error.textContent = message || "";
    error.hidden = !message;
    const entry = row.querySelector("input.entry");
    if (entry) entry.setAttribute("aria-invalid", message ? "true" : "false");
  }

  /** A setting changed by the reader: a preset or config loaded earlier no longer describes the page. */
  function changedByHand(id) {
    if (["dim", "scaling", "scheme"].includes(id) && (page.state.shortFactor || page.state.longFactor)) {
      // longrope's lists belong to one width; keep them while they fit, so the preset can be explored
      const pairs = Math.ceil(rotaryDim(page.state) / 2);
      if ((page.state.shortFactor || []).length !== pairs) Object.assign(page.state, { shortFactor: null, longFactor: null });
    }
    document.getElementById("loaded").textContent = page.loaded ? `${page.loaded} (changed by hand since)` : "";
  }

  function buildControls(root) {
    for (const control of CONTROLS) {
      const row = element("div", { className: control.kind === "entry" ? "control entry-only" : "control" }, root);
      row.dataset.control = control.id;
      const name = element("label", { className: "name", textContent: control.label, htmlFor: `control-${control.id}` }, row);
      name.id = `label-${control.id}`;
      let input;
      if (control.kind === "select") {
        input = element("select", {}, row);
        for (const option of control.options) input.add(new Option(option, option));
        input.value = page.state[control.id];
      } else if (control.kind === "check") {
        input = element("input", { type: "checkbox", checked: page.state[control.id] }, row);
      } else if (control.kind !== "entry") {
        input = element("input", { type: "range" }, row);
        if (control.kind === "stops") Object.assign(input, { min: 0, max: control.stops.length - 1, step: 1 });
        else Object.assign(input, { min: control.min, max: control.max, step: control.step });
        input.value = sliderOf(control, page.state[control.id]);
        input.setAttribute("aria-labelledby", name.id);
      }
      if (input) input.id = `control-${control.id}`;
      if (control.accept) {
        const entry = element("input", { type: "text", className: "entry", inputMode: "decimal", spellcheck: false, autocomplete: "off" }, row);
        entry.id = `entry-${control.id}`;
        entry.setAttribute("aria-label", `${control.label}, exact value`);
        if (control.accept.optional) entry.placeholder = "unset";
        if (!input) name.htmlFor = entry.id;
        entry.addEventListener("input", () => {
          const parsed = parseEntry(control, entry.value, page.state);
          setError(row, parsed.error);
          if (parsed.error) return;
          page.state[control.id] = parsed.value;
          if (input) input.value = sliderOf(control, parsed.value === null ? 0 : parsed.value);
          changedByHand(control.id);
          schedule();
        });
      }
      element("div", { className: "error", hidden: true, role: "alert" }, row);
      if (HELP[control.id]) element("small", { textContent: HELP[control.id] }, row);
      if (!input) continue;
      const update = () => {
        const s = page.state;
        s[control.id] = control.kind === "check" ? input.checked : control.kind === "select" ? input.value : fromSlider(control, input.value);
        setError(row, "");
        changedByHand(control.id);
        schedule();
      };
      input.addEventListener(control.kind === "select" || control.kind === "check" ? "change" : "input", update);
    }
  }

  /** Rows shown for the settings, each slider and number box showing the settings' value (a box
   *  being typed into keeps its text). */
  function syncControls() {
    const s = page.state;
    for (const control of CONTROLS) {
      const row = document.querySelector(`[data-control="${control.id}"]`);
      row.hidden = !visible(control, s);
      if (control.id === "clockPosition" && s.clockPosition > s.positions - 1) s.clockPosition = s.positions - 1;
      if (control.id === "head" && s.head > s.heads - 1) s.head = s.heads - 1;
      const input = document.getElementById(`control-${control.id}`);
      if (input) {
        if (control.id === "clockPosition") input.max = s.positions - 1;
        if (control.id === "head") input.max = s.heads - 1;
        if (control.kind === "select") input.value = s[control.id];
        else if (control.kind === "check") input.checked = s[control.id];
        else input.value = sliderOf(control, s[control.id]);
      }
      const entry = document.getElementById(`entry-${control.id}`);
      if (entry && document.activeElement !== entry && entry.getAttribute("aria-invalid") !== "true") {
        entry.value = s[control.id] === null ? "" : String(s[control.id]);
      }
    }
  }

  // ---- presets and pasted configs
  function buildModels() {
    const presets = document.getElementById("preset");
    presets.add(new Option("— a model's RoPE —", ""));
    for (const preset of PRESETS) {  // a short label fits the 300 px column; the full name is its tooltip
      const option = new Option(preset.label, preset.id);
      option.title = preset.name;
      presets.add(option);
    }
    presets.addEventListener("change", () => {
      const preset = PRESETS.find((p) => p.id === presets.value);
      if (preset) load(preset.config, preset.layerType, preset.length, `${preset.name}; source: ${preset.source}`);
    });
    document.getElementById("config-read").addEventListener("click", () => paste(null));
    document.getElementById("config-layer").addEventListener("change", (event) => paste(event.target.value));
  }

  function configMessage(text, isError) {
    const box = document.getElementById("config-message");
    box.textContent = text;
    box.className = isError ? "bad" : "good";
    box.hidden = !text;
  }

  /** Read the pasted text as JSON (JSON.parse: nothing in it runs) and show that model's RoPE. */
  function paste(layerType) {
    const text = document.getElementById("config-text").value;
    let config;
    try {
      config = JSON.parse(text);
    } catch (err) {
      configMessage(`This is not valid JSON (${err.message}). Paste the config.json's text, or an object with its RoPE fields.`, true);
      return false;
    }
    document.getElementById("preset").value = "";
    return load(config, layerType, null, "the pasted config");
  }

  /** Settings from a config: on success the page redraws and says what it read; on failure it says why. */
  function load(config, layerType, length, what) {
    let read;
    let settings;
    try {
      read = readConfig(config, layerType || null);
      settings = settingsOf(read, length);
      compute(Object.assign({}, page.state, settings)); // the frequencies posenc would refuse (longrope's list lengths)
    } catch (err) {
      configMessage(`${what === "the pasted config" ? "The pasted config" : what}: ${err.message}`, true);
      return false;
    }
    const layers = document.getElementById("config-layer");
    layers.replaceChildren(...read.layerTypes.map((kind) => new Option(kind, kind)));
    layers.value = read.layerType || "";
    document.getElementById("config-layer-row").hidden = read.layerTypes.length === 0;
    Object.assign(page.state, settings);
    CONTROLS.forEach((control) => setError(document.querySelector(`[data-control="${control.id}"]`), ""));
    const scaling = read.scaling ? brief(read.scaling) : "none (default RoPE)";
    const lines = [
      `Read ${what}${read.layerType ? `, ${read.layerType} layers` : ""}:`,
      `head width ${read.headDim} (${read.headFrom}); ${read.rotated} features rotate (${read.rotatedFrom}); base ${read.base} (${read.baseFrom});`,
      `pair layout ${read.layout || page.state.layout}; rope scaling ${scaling}; sequence length ${page.state.curveLength}.`,
      ...read.notes,
    ];
    configMessage(lines.join("\n"), false);
    page.loaded = what;
    document.getElementById("loaded").textContent = `Showing ${what}.`;
    schedule();
    return true;
  }

  // ---- drawing
  /** Coalesce a burst of input events into one redraw on the next turn of the event loop. */
  function schedule() {
    if (page.pending === null) page.pending = setTimeout(draw, 0);
  }

  function showTable(table) {
    const box = document.getElementById("numbers");
    box.hidden = !table;
    if (!table) return;
    document.getElementById("numbers-caption").textContent = `Every number: ${table.caption}`;
    const widths = table.header.map((h, j) => Math.max(h.length, ...table.rows.map((row) => row[j].length)));
    const line = (cells) => cells.map((c, j) => c.padStart(widths[j])).join("  ");
    document.getElementById("numbers-text").textContent = [line(table.header), ...table.rows.map(line)].join("\n");
  }

  function draw() {
    page.pending = null;
    syncControls();
    const message = document.getElementById("message");
    let model;
    try {
      model = compute(page.state);
      message.hidden = true;
    } catch (err) {
      message.textContent = err.message;
      message.hidden = false;
      page.model = null;
      return settle();
    }
    page.model = model;
    document.getElementById("summary").textContent = model.summary;
    showTable(model.table);
    const drawn = [];
    for (const [key, id] of PANELS) {
      const panel = model[key];
      const box = document.getElementById(id).closest(".panel");
      box.hidden = !panel;
      if (!panel) continue;
      box.querySelector(".help").textContent = panel.help;
      drawn.push(key === "curve" ? curve(id, panel) : key === "clock" ? clock(id, panel) : heatmap(id, panel));
    }
    const none = document.getElementById("none");
    none.hidden = !model.none;
    none.textContent = model.none || "";
    return Promise.all(drawn).then(settle);
  }

  function settle() {
    page.draws += 1;
    document.body.dataset.draws = String(page.draws);
    const waiting = page.waiting;
    page.waiting = [];
    waiting.forEach((resolve) => resolve());
  }

  function nextDraw() {
    return new Promise((resolve) => page.waiting.push(resolve));
  }

  // ---- the test hook
  function plotted() {
    const data = (id) => (document.getElementById(id).data || []).map((trace) => trace.z || trace.y);
    return { code: data("plot-code")[0] || null, curve: data("plot-curve"), draws: page.draws };
  }

  /** What the page shows after a step: settings, each visible control's slider and number box and
   *  error, the messages, the numbers table's text and the right axis's tick labels. */
  function shown() {
    const controls = {};
    for (const control of CONTROLS) {
      const row = document.querySelector(`[data-control="${control.id}"]`);
      if (row.hidden) continue;
      const input = document.getElementById(`control-${control.id}`);
      const entry = document.getElementById(`entry-${control.id}`);
      const error = row.querySelector(".error");
      controls[control.id] = { slider: input && input.type === "range" ? Number(input.value) : null,
        entry: entry ? entry.value : null, error: error.hidden ? null : error.textContent };
    }
    const visibleText = (id) => (document.getElementById(id).hidden ? null : document.getElementById(id).textContent);
    const model = page.model;
    return {
      state: Object.assign({}, page.state), controls, message: visibleText("message"), config: visibleText("config-message"),
      layerTypes: Array.from(document.getElementById("config-layer").options).map((o) => o.value),
      numbers: visibleText("numbers") === null ? null : document.getElementById("numbers-text").textContent,
      frequencies: model && model.frequencies ? model.frequencies : null,
      clock: model && model.clock ? { position: model.clock.position, pairs: model.clock.pairs, sin: model.clock.sin, cos: model.clock.cos } : null,
      code: model && page.state.positions <= 32 ? model.code.z : null, // the heatmap drawn, when small
      rightTicks: Array.from(document.querySelectorAll("#plot-curve .y2tick text")).map((t) => t.textContent),
      overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      draws: page.draws,
    };
  }

  /** One step as a person does it: type into a number box, move a slider (or press an arrow key
   *  on it: step), pick an option, tick a box, pick a preset, or paste a config and press the button. */
  async function act(step) {
    const fire = (node, type) => node.dispatchEvent(new Event(type, { bubbles: true }));
    const drawn = nextDraw();
    if (step.do === "type") {
      const entry = document.getElementById(`entry-${step.id}`);
      entry.focus({ preventScroll: true });
      entry.value = step.text;
      fire(entry, "input");
      entry.blur();
    } else if (step.do === "slide" || step.do === "step") {
      const input = document.getElementById(`control-${step.id}`);
      if (step.do === "slide") input.value = step.value;
      else if (step.by > 0) input.stepUp(step.by);
      else input.stepDown(-step.by);
      fire(input, "input");
    } else if (step.do === "select" || step.do === "check") {
      const input = document.getElementById(`control-${step.id}`);
      if (step.do === "check") input.checked = step.value;
      else input.value = step.value;
      fire(input, "change");
    } else if (step.do === "preset") {
      const select = document.getElementById("preset");
      select.value = step.id;
      fire(select, "change");
    } else if (step.do === "paste") {
      document.getElementById("config-text").value = step.text;
      if (step.layerType) {
        paste(null);
        const layers = document.getElementById("config-layer");
        layers.value = step.layerType;
        fire(layers, "change");
      } else {
        document.getElementById("config-read").click();
      }
    }
    if (page.pending !== null) await drawn;
    syncControls();
    return shown();
  }

  /** ?test=JSON: {cases: [settings...], actions: [{id, value}...], steps: [...], presets: true}.
   *  Each case's panels are computed; each action moves a control and records the plots before
   *  and after; the steps run in turn (act), and with presets each preset is loaded. The result
   *  goes into <pre id="test-output">. */
  async function runTestHook(spec) {
    const out = { cases: [], actions: [], steps: [], presets: [] };
    for (const given of spec.cases || []) {
      try {
        const settings = Object.assign({}, DEFAULTS, given);
        const model = compute(settings);
        const panel = (p) => (p ? p.z || null : null);
        out.cases.push({
          code: panel(model.code), dot: panel(model.dot), cosine: panel(model.cosine),
          clock: model.clock ? { pairs: model.clock.pairs, sin: model.clock.sin, cos: model.clock.cos } : null,
          curve: model.curve.lines.map((line) => line.y), curveX: model.curve.x,
          invFreq: settings.scheme === "rope" ? ropeInvFreq(rotaryDim(settings), settings.base, scalingOf(settings), settings.curveLength) : null,
        });
      } catch (err) {
        out.cases.push({ error: err.message });
      }
    }
    for (const action of spec.actions || []) {
      const before = plotted();
      const input = document.getElementById(`control-${action.id}`);
      const drawn = nextDraw();
      if (input.type === "checkbox") input.checked = action.value;
      else input.value = action.value;
      input.dispatchEvent(new Event(input.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
      await drawn;
      out.actions.push({ id: action.id, before, after: plotted(), state: Object.assign({}, page.state) });
    }
    for (const step of spec.steps || []) out.steps.push(Object.assign({ step }, await act(step)));
    if (spec.presets) {
      for (const preset of PRESETS) {
        const result = await act({ do: "preset", id: preset.id });
        const select = document.getElementById("preset");
        const option = select.options[select.selectedIndex];
        const ruler = document.createElement("canvas").getContext("2d");
        ruler.font = getComputedStyle(select).font;  // the label's width as the closed drop-down draws it
        const fit = { label: option.text, labelPx: ruler.measureText(option.text).width, selectPx: select.clientWidth };
        out.presets.push(Object.assign({ id: preset.id, presetConfig: preset.config, layerType: preset.layerType || null, source: preset.source }, fit, result));
      }
    }
    const pre = document.getElementById("test-output");
    pre.textContent = JSON.stringify(out);
    document.body.dataset.testDone = "1";
  }

  function start() {
    if (typeof Plotly === "undefined") {
      document.getElementById("message").textContent = "plotly.js did not load: the page cannot draw.";
      document.getElementById("message").hidden = false;
      return;
    }
    const params = new URLSearchParams(location.search);
    const spec = params.get("test");
    buildControls(document.getElementById("controls-list"));
    buildModels();
    const first = nextDraw();
    const preset = PRESETS.find((p) => p.id === params.get("preset"));
    if (preset) {
      document.getElementById("preset").value = preset.id;
      load(preset.config, preset.layerType, preset.length, `${preset.name}; source: ${preset.source}`);
    }
    draw();
    if (spec) first.then(() => runTestHook(JSON.parse(spec)));
  }

  if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", start);
})(typeof window !== "undefined" ? window : globalThis);
