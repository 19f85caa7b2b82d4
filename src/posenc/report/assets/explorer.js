/* posenc interactive explorer: the encodings of posenc computed in the page and drawn with plotly.js.
 *
 * Part 1 (PosencMath) ports posenc's formulas to JavaScript, function by function; each names the
 * Python function it mirrors, and tests/report/test_explorer.py checks every panel's numbers
 * against posenc to 1e-6. Part 2 (model) turns the settings into the five panels' data. Part 3
 * (the page) builds the controls, draws with Plotly.react and exposes a test hook (?test=JSON).
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

  /** posenc.functional.rope.rope_inv_freq: {invFreq, attentionScale} for a rope_scaling dict. */
  function ropeInvFreq(dim, base, scaling, seqLen) {
    if (!(base > 1)) fail(`base must be greater than 1, got ${base}`);
    if (dim < 2 || dim % 2) fail(`the explorer draws RoPE at an even width d >= 2, got ${dim}`);
    const params = scaling || {};
    const kind = params.rope_type || "default";
    if (!(kind in ROPE_SCALINGS)) fail(`unknown rope scaling '${kind}'; choose one of ${Object.keys(ROPE_SCALINGS)}`);
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

  /** Long-sequence defaults of the scaling keys shown in the page; longrope's factor lists are
   *  made up for the page (short: all 1; long: rising linearly from 1 to factor over the pairs). */
  function scalingOf(s) {
    const kind = s.scaling;
    const params = { rope_type: kind };
    const pairs = Math.floor(s.dim / 2);
    if (kind !== "default") params.factor = s.factor;
    if (["dynamic", "yarn", "llama3", "longrope"].includes(kind)) params.original_max_position_embeddings = s.original;
    if (kind === "yarn") Object.assign(params, { beta_fast: s.betaFast, beta_slow: s.betaSlow });
    if (kind === "llama3") Object.assign(params, { low_freq_factor: s.lowFreq, high_freq_factor: s.highFreq });
    if (kind === "proportional") params.partial_rotary_factor = s.partial;
    if (kind === "longrope") {
      params.short_factor = s.shortFactor || arange(pairs).map(() => 1);
      params.long_factor = s.longFactor || arange(pairs).map((i) => 1 + ((s.factor - 1) * i) / Math.max(pairs - 1, 1));
    }
    return params;
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
    const { invFreq, attentionScale } = ropeInvFreq(s.dim, s.base, scaling, s.curveLength);
    const rows = ropeRows(arange(s.positions), invFreq, s.layout, attentionScale);
    const gram = dotMatrix(rows);
    const pairs = invFreq.length;
    const distances = curveDistances(s.curveLength);
    const meanCos = (freqs, scale) =>
      distances.map((t) => (scale * scale * freqs.reduce((sum, f) => sum + Math.cos(twoPiMod(t * f)), 0)) / pairs);
    const lines = [{ name: `${scaling.rope_type}: mean of s² cos(t θ_i)`, y: meanCos(invFreq, attentionScale) },
      { name: `${scaling.rope_type}: RoFormer bound (right axis)`, y: ropeDecayBound(invFreq, distances), dash: "dot", right: true }];
    if (scaling.rope_type !== "default") {
      lines.push({ name: "default: mean of cos(t θ_i)", y: meanCos(defaultInvFreq(s.dim, s.base), 1), grey: true });
    }
    const marks = scaling.original_max_position_embeddings ? [{ x: scaling.original_max_position_embeddings, name: "original length" }] : [];
    return {
      summary: `θ_i: wavelengths ${fmt(TWO_PI / invFreq[0])} … ${invFreq[pairs - 1] > 0 ? fmt(TWO_PI / invFreq[pairs - 1]) : "∞"} positions; attention scale s = ${fmt(attentionScale)}; frequencies for a sequence of ${s.curveLength}`,
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
    betaFast: 32, betaSlow: 1, lowFreq: 1, highFreq: 4, partial: 0.5,
    heads: 8, maxBias: 8, head: 0, bidirectional: false, numBuckets: 32, maxDistance: 128,
  };

  global.PosencMath = {
    twoPiMod, sinusoidalInvFreq, sinusoidalTable, defaultInvFreq, ropeInvFreq, ropeRows, ropeDecayBound,
    alibiSlopes, alibiBias, t5Bucket, dotMatrix, cosineDistanceMatrix, curveDistances, compute, scalingOf, DEFAULTS, ROPE_SCALINGS,
  };

  // ------------------------------------------------------------------ Part 3: the page
  const ALL = ["sinusoidal", "rope", "alibi", "t5"];
  const SCALED = ["linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional"];
  const WITH_ORIGINAL = ["dynamic", "yarn", "llama3", "longrope"];

  // id, label, kind, schemes (and rope scalings) it applies to, range; log ranges slide the log10.
  const CONTROLS = [
    { id: "scheme", label: "scheme", kind: "select", options: ALL, schemes: ALL },
    { id: "scaling", label: "RoPE scaling (rope_type)", kind: "select", options: ["default", ...SCALED], schemes: ["rope"] },
    { id: "dim", label: "dimension d", kind: "range", min: 2, max: 256, step: 2, schemes: ["sinusoidal", "rope"] },
    { id: "base", label: "base", kind: "log", min: 1, max: 7, step: 0.05, schemes: ["sinusoidal", "rope"] },
    { id: "positions", label: "positions n (matrices)", kind: "range", min: 4, max: 512, step: 1, schemes: ALL },
    { id: "curveLength", label: "distances L (curve; RoPE's sequence length)", kind: "log", min: 1, max: 5, step: 0.05, whole: true, schemes: ALL },
    { id: "clockPosition", label: "clock position p", kind: "range", min: 0, max: 127, step: 1, schemes: ["sinusoidal", "rope"] },
    { id: "layout", label: "pair layout", kind: "select", options: ["half", "interleaved"], schemes: ["sinusoidal", "rope"] },
    { id: "frequencies", label: "sinusoid frequencies", kind: "select", options: ["paper", "tensor2tensor"], schemes: ["sinusoidal"] },
    { id: "factor", label: "factor", kind: "range", min: 1, max: 32, step: 0.5, schemes: ["rope"], scalings: SCALED },
    { id: "original", label: "original_max_position_embeddings", kind: "log", min: 1, max: 4.5, step: 0.05, whole: true, schemes: ["rope"], scalings: WITH_ORIGINAL },
    { id: "betaFast", label: "beta_fast (yarn)", kind: "range", min: 2, max: 64, step: 1, schemes: ["rope"], scalings: ["yarn"] },
    { id: "betaSlow", label: "beta_slow (yarn)", kind: "range", min: 0.25, max: 8, step: 0.25, schemes: ["rope"], scalings: ["yarn"] },
    { id: "lowFreq", label: "low_freq_factor (llama3)", kind: "range", min: 0.5, max: 8, step: 0.5, schemes: ["rope"], scalings: ["llama3"] },
    { id: "highFreq", label: "high_freq_factor (llama3)", kind: "range", min: 0.5, max: 16, step: 0.5, schemes: ["rope"], scalings: ["llama3"] },
    { id: "partial", label: "partial_rotary_factor (proportional)", kind: "range", min: 0.05, max: 1, step: 0.05, schemes: ["rope"], scalings: ["proportional"] },
    { id: "heads", label: "heads h", kind: "range", min: 1, max: 64, step: 1, schemes: ["alibi"] },
    { id: "maxBias", label: "max_bias (8 in the paper)", kind: "range", min: 1, max: 16, step: 0.5, schemes: ["alibi"] },
    { id: "head", label: "head drawn as a matrix", kind: "range", min: 0, max: 63, step: 1, schemes: ["alibi"] },
    { id: "numBuckets", label: "num_buckets", kind: "range", min: 4, max: 128, step: 2, schemes: ["t5"] },
    { id: "maxDistance", label: "max_distance", kind: "log", min: 0.7, max: 3.5, step: 0.05, whole: true, schemes: ["t5"] },
    { id: "bidirectional", label: "bidirectional", kind: "check", schemes: ["alibi", "t5"] },
  ];

  const HELP = {
    scheme: "sinusoidal: Vaswani et al. 2017; rope: Su et al. 2021; alibi: Press et al. 2022; t5: Raffel et al. 2020.",
    scaling: "Hugging Face rope_type; longrope's lists here: short all 1, long rising from 1 to factor.",
    curveLength: "The curve's range (T5: at most 2 max_distance); RoPE's dynamic and longrope take their frequencies for a sequence this long.",
  };

  function fromSlider(control, raw) {
    const x = Number(raw);
    if (control.kind !== "log") return x;
    const value = Math.pow(10, x);
    return control.whole ? Math.round(value) : Number(value.toPrecision(3));
  }

  function toSlider(control, value) {
    return control.kind === "log" ? Math.log10(value) : value;
  }

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
      layout.yaxis2 = { title: { text: panel.ylabel2, font: { color: "#b42318" } }, overlaying: "y", side: "right", showgrid: false,
        automargin: true, rangemode: "tozero" };
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
  };

  function visible(control, s) {
    return control.schemes.includes(s.scheme) && (!control.scalings || control.scalings.includes(s.scaling));
  }

  function buildControls(root) {
    for (const control of CONTROLS) {
      const row = document.createElement("label");
      row.className = "control";
      row.dataset.control = control.id;
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = control.label;
      row.appendChild(name);
      let input;
      if (control.kind === "select") {
        input = document.createElement("select");
        for (const option of control.options) input.add(new Option(option, option));
        input.value = page.state[control.id];
      } else if (control.kind === "check") {
        input = document.createElement("input");
        input.type = "checkbox";
        input.checked = page.state[control.id];
      } else {
        input = document.createElement("input");
        input.type = "range";
        Object.assign(input, { min: control.min, max: control.max, step: control.step });
        input.value = toSlider(control, page.state[control.id]);
      }
      input.id = `control-${control.id}`;
      const readout = document.createElement("output");
      row.appendChild(input);
      row.appendChild(readout);
      if (HELP[control.id]) {
        const help = document.createElement("small");
        help.textContent = HELP[control.id];
        row.appendChild(help);
      }
      const update = () => {
        page.state[control.id] = control.kind === "check" ? input.checked : control.kind === "select" ? input.value : fromSlider(control, input.value);
        schedule();
      };
      input.addEventListener("input", update);
      input.addEventListener("change", update);
      root.appendChild(row);
    }
  }

  function syncControls() {
    const s = page.state;
    for (const control of CONTROLS) {
      const row = document.querySelector(`[data-control="${control.id}"]`);
      row.hidden = !visible(control, s);
      const input = row.querySelector("input, select");
      if (control.id === "clockPosition") {
        input.max = s.positions - 1;
        if (s.clockPosition > s.positions - 1) s.clockPosition = s.positions - 1;
      }
      if (control.id === "head") {
        input.max = s.heads - 1;
        if (s.head > s.heads - 1) s.head = s.heads - 1;
      }
      if (control.kind === "range" || control.kind === "log") row.querySelector("output").textContent = fmt(s[control.id]);
    }
  }

  /** Coalesce a burst of input events into one redraw on the next turn of the event loop. */
  function schedule() {
    if (page.pending === null) page.pending = setTimeout(draw, 0);
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
      return settle();
    }
    document.getElementById("summary").textContent = model.summary;
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

  function plotted() {
    const data = (id) => (document.getElementById(id).data || []).map((trace) => trace.z || trace.y);
    return { code: data("plot-code")[0] || null, curve: data("plot-curve"), draws: page.draws };
  }

  /** ?test=JSON: {cases: [settings...], actions: [{id, value}...]}. Each case's panels are
   *  computed; each action sets a control as a person would (value, then an input event) and
   *  records what the plots hold before and after. The result goes into <pre id="test-output">. */
  async function runTestHook(spec) {
    const out = { cases: [], actions: [] };
    for (const given of spec.cases || []) {
      try {
        const settings = Object.assign({}, DEFAULTS, given);
        const model = compute(settings);
        const panel = (p) => (p ? p.z || null : null);
        out.cases.push({
          code: panel(model.code), dot: panel(model.dot), cosine: panel(model.cosine),
          clock: model.clock ? { pairs: model.clock.pairs, sin: model.clock.sin, cos: model.clock.cos } : null,
          curve: model.curve.lines.map((line) => line.y), curveX: model.curve.x,
          invFreq: settings.scheme === "rope" ? ropeInvFreq(settings.dim, settings.base, scalingOf(settings), settings.curveLength) : null,
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
    const spec = new URLSearchParams(location.search).get("test");
    buildControls(document.getElementById("controls"));
    const first = nextDraw();
    draw();
    if (spec) first.then(() => runTestHook(JSON.parse(spec)));
  }

  if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", start);
})(typeof window !== "undefined" ? window : globalThis);
