"""Explorable figures: a slider, a canvas and a static fallback, for a site with no kernel and no network.

Each builder computes its numbers with ``posenc`` in float64 when it runs, rounds them to
4 significant digits (the heatmap's to 1e-4: the text is the same on every CPU) and returns an
:class:`Explorable`. Its ``text/html`` is one self-contained ``<figure>``: the numbers as
JSON, a short inline script that draws them on a canvas as the slider moves (no library,
no external URL), and a PNG drawn by matplotlib at the default setting, shown when
printing or when JavaScript is off. Its ``text/plain`` is a one-line description.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from dataclasses import dataclass

import matplotlib as mpl
import torch
from matplotlib.figure import Figure

from posenc import (
    alibi_bias,
    apply_rope,
    ntk_scaled_base,
    rope_cos_sin,
    rope_inv_freq,
    sinusoidal_frequencies,
    sinusoidal_table,
    t5_relative_position_bucket,
)

from .style import BOOK_STYLE

F64 = torch.float64
TABLE_SCALE = 10_000  # the heatmap's values travel as int16 in units of 1e-4
CSS = (
    ".explorable-static{display:none} @media print{.explorable-live{display:none}"
    ".explorable-static{display:block;max-width:100%}}"
)
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#333333")  # colour-blind safe; DASHES tell them apart too
DASHES = ((), (8, 4), (2, 3), (10, 3, 2, 3), (16, 4, 4, 4))
BASES = (10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000)
FACTORS = (1, 2, 4, 8, 16, 32)
SCALING_METHODS = ("linear", "NTK-aware", "dynamic", "YaRN", "Llama 3")

# Shared by every widget: axes with ticks, lines, a legend, and the render loop. `draw(c, w, h, s)` paints
# the canvas for the slider values `s` and returns the text of the <output>.
JS_HEAD = r"""
const root=document.getElementById(ID),D=JSON.parse(document.getElementById(ID+'-data').textContent);
const live=root.querySelector('.explorable-live'),cv=root.querySelector('canvas'),out=root.querySelector('output');
const ins=[...root.querySelectorAll('input[type=range]')],F='13px system-ui,sans-serif',INK='#222',GRID='#ddd';
const COL=D.colors,DASH=D.dashes,M=v=>String(v).replace('-','\u2212');
const fmt=v=>M(Math.abs(v)>=1e4?Math.round(v).toLocaleString('en-US'):String(+(+v).toPrecision(4)));
function nice(a,b,log){const lo=Math.min(a,b),hi=Math.max(a,b),t=[];
  if(log){for(let e=Math.floor(Math.log10(lo));e<=Math.log10(hi);e++)for(const m of[1,2,5]){const v=m*10**e;
    if(v>=lo*.999&&v<=hi*1.001)t.push(v)}return t}
  const r=(hi-lo)/5,p=10**Math.floor(Math.log10(r)),st=[1,2,5,10].map(m=>m*p).find(x=>x>=r);
  for(let v=Math.ceil(lo/st)*st;v<=hi+st*1e-9;v+=st)t.push(+v.toPrecision(12));return t}
function txt(c,s,x,y,a,b,col,rot){c.save();c.fillStyle=col||INK;c.font=F;c.textAlign=a||'center';
  c.textBaseline=b||'middle';c.translate(x,y);if(rot)c.rotate(rot);c.fillText(s,0,0);c.restore()}
function seg(c,a,b,d,e){c.beginPath();c.moveTo(a,b);c.lineTo(d,e);c.stroke()}
function poly(c,p,col,dash,lw){c.save();c.strokeStyle=col;c.setLineDash(dash||[]);c.lineWidth=lw||2;c.beginPath();
  p.forEach((q,i)=>i?c.lineTo(q[0],q[1]):c.moveTo(q[0],q[1]));c.stroke();c.restore()}
function axes(c,b,X,Y,xl,yl,title){const f=(a,v)=>a[2]?Math.log(v/a[0])/Math.log(a[1]/a[0]):(v-a[0])/(a[1]-a[0]);
  const sx=v=>b[0]+f(X,v)*b[2],sy=v=>b[1]+b[3]-f(Y,v)*b[3];let last=-1e9;c.lineWidth=1;
  for(const v of nice(X[0],X[1],X[2])){const x=sx(v);c.strokeStyle=GRID;seg(c,x,b[1],x,b[1]+b[3]);
    if(Math.abs(x-last)>=44){txt(c,fmt(v),x,b[1]+b[3]+4,'center','top');last=x}}
  last=-1e9;for(const v of nice(Y[0],Y[1],Y[2])){const y=sy(v);c.strokeStyle=GRID;seg(c,b[0],y,b[0]+b[2],y);
    if(Math.abs(y-last)>=18){txt(c,fmt(v),b[0]-5,y,'right');last=y}}
  c.strokeStyle=INK;c.strokeRect(b[0],b[1],b[2],b[3]);txt(c,xl,b[0]+b[2]/2,b[1]+b[3]+22,'center','top');
  txt(c,yl,b[0]-42,b[1]+b[3]/2,'center','bottom',INK,-Math.PI/2);
  if(title)txt(c,title,b[0]+b[2]/2,b[1]-7,'center','bottom');return{sx,sy}}
function legend(c,x,y,names){names.forEach((n,i)=>{poly(c,[[x,y+i*17],[x+30,y+i*17]],COL[i],DASH[i]);
  txt(c,n,x+36,y+i*17,'left')})}
let lastw=-1;function render(){const w=cv.clientWidth||720,h=D.H[w<560?1:0],r=window.devicePixelRatio||1;
  lastw=w;cv.style.height=h+'px';cv.width=Math.round(w*r);cv.height=Math.round(h*r);const c=cv.getContext('2d');
  c.setTransform(r,0,0,r,0,0);c.fillStyle='#fff';c.fillRect(0,0,w,h);const s=ins.map(i=>+i.value);
  ins.forEach((i,k)=>i.setAttribute('aria-valuetext',D.T[k][s[k]]));out.textContent=draw(c,w,h,s)}
"""
JS_TAIL = r"""live.hidden=false;ins.forEach(i=>i.addEventListener('input',render));
new ResizeObserver(()=>{if(cv.clientWidth!==lastw)render()}).observe(live);render();"""

SINE_JS = r"""
const RB=['053061','2166ac','4393c3','92c5de','d1e5f0','f7f7f7','fddbc7','f4a582','d6604d','b2182b','67001f']
  .map(h=>[0,2,4].map(i=>parseInt(h.slice(i,i+2),16)));
function cmap(v){const x=(Math.max(-1,Math.min(1,v))+1)*5,i=Math.min(9,Math.floor(x)),f=x-i;
  return 'rgb('+RB[i].map((a,k)=>Math.round(a+(RB[i+1][k]-a)*f))+')'}
const TB=D.tables.map(b=>{const r=atob(b),a=[];for(let i=0;i<r.length;i+=2)
  a.push(((r.charCodeAt(i)|r.charCodeAt(i+1)<<8)<<16>>16)/D.scale);return a});
function draw(c,w,h,s){const P=D.positions,N=D.dim,t=TB[s[0]],L=D.wavelengths[s[0]],cut=L.findIndex(l=>l>P);
  const b=[56,28,w-56-(w<560?58:90),h-28-48],B=D.T[0][s[0]];
  const A=axes(c,b,[0,N],[P,0],'channel','position','PE(position, channel), base '+B);const cw=b[2]/N,rh=b[3]/P;
  for(let p=0;p<P;p++)for(let j=0;j<N;j++){c.fillStyle=cmap(t[p*N+j]);c.fillRect(b[0]+j*cw,b[1]+p*rh,cw+.6,rh+.6)}
  c.strokeStyle=INK;c.strokeRect(b[0],b[1],b[2],b[3]);const x=b[0]+b[2]+14;
  for(let i=0;i<b[3];i++){c.fillStyle=cmap(1-2*i/b[3]);c.fillRect(x,b[1]+i,14,1.5)}
  [1,0,-1].forEach((v,i)=>txt(c,fmt(v),x+18,b[1]+i*b[3]/2,'left'));
  if(cut>=0)poly(c,[[A.sx(2*cut),b[1]],[A.sx(2*cut),b[1]+b[3]]],INK,[6,4],2.5);
  return 'base '+B+': slowest wavelength 2\u03c0\u00b7base^('+(N-2)+'/'+N+') = '+fmt(L[L.length-1])+' positions; '
    +(cut<0?'every pair turns at least once in '+P+' positions':'pairs '+cut+' to '+(N/2-1)+' (right of the dashed'
    +' line) have wavelengths longer than the '+P+' positions shown')}
"""

ROPE_JS = r"""
function arrow(c,x0,y0,x1,y1,col,dash){const a=Math.atan2(y1-y0,x1-x0);poly(c,[[x0,y0],[x1,y1]],col,dash,3);
  c.fillStyle=col;c.beginPath();c.moveTo(x1,y1);c.lineTo(x1-12*Math.cos(a-.4),y1-12*Math.sin(a-.4));
  c.lineTo(x1-12*Math.cos(a+.4),y1-12*Math.sin(a+.4));c.fill()}
function draw(c,w,h,s){const m=s[0],n=s[1],o=n-m,q=D.q[m],k=D.k[n],dot=D.dots[m][n],wide=w>=560;
  const side=wide?Math.min(h,w*.42):Math.min(w,300),R=side/2-40,cx=wide?side/2+4:w/2,cy=side/2,u=R/D.norm;
  c.strokeStyle=GRID;c.lineWidth=1;seg(c,cx-R-12,cy,cx+R+12,cy);seg(c,cx,cy-R-12,cx,cy+R+12);
  c.beginPath();c.arc(cx,cy,R,0,2*Math.PI);c.stroke();  // the labels of nearly parallel arrows move apart
  const cr=q[0]*k[1]-q[1]*k[0],g=Math.abs(Math.atan2(cr,q[0]*k[0]+q[1]*k[1]))<.6?(q[1]>k[1]?-9:9):0;
  [[q,'q at m = '+m],[k,'k at n = '+n]].forEach(([v,l],i)=>{const a=Math.atan2(v[1],v[0]),C=Math.cos(a);
  arrow(c,cx,cy,cx+v[0]*u,cy-v[1]*u,COL[i],DASH[i]);const r=R+14+28*Math.abs(C),tx=cx+r*C,ty=cy-r*Math.sin(a)+(i?-g:g);
  txt(c,l,Math.max(40,Math.min(w-40,tx)),ty,'center','middle',COL[i])});
  const b=wide?[side+90,28,w-side-108,h-28-48]:[58,side+26,w-76,h-side-26-48];
  const A=axes(c,b,[-D.max-1,D.max+1],[-D.norm,D.norm],'offset n \u2212 m','q\u00b7k',
    'q\u00b7k of all '+(D.max+1)**2+' pairs (m, n)');
  c.fillStyle='#888';D.dots.forEach((r,i)=>r.forEach((v,j)=>{c.beginPath();c.arc(A.sx(j-i),A.sy(v),3,0,7);c.fill()}));
  c.fillStyle=COL[1];c.beginPath();c.arc(A.sx(o),A.sy(dot),7,0,7);c.fill();
  return 'q at m = '+m+', k at n = '+n+', n \u2212 m = '+M(o)+': q\u00b7k = '+M(dot)
    +'; every pair of positions with n \u2212 m = '+M(o)+' gives the same score'}
"""

SCALE_JS = r"""
function draw(c,w,h,s){const f=s[0],wide=w>=560,S=D.stretch.map(m=>m[f]),P=S[0].length;
  const b=[60,28,w-78,h-28-48-(wide?0:D.methods.length*17+8)];
  const A=axes(c,b,[0,P-1],[1,D.ymax,1],'pair index i','stretch \u03b8\u1d62 / \u03b8\u2032\u1d62',
    'how many times slower each pair turns, factor '+D.factors[f]);
  c.fillStyle='rgba(0,0,0,.06)';c.fillRect(A.sx(D.slow-.5),b[1],b[0]+b[2]-A.sx(D.slow-.5),b[3]);
  txt(c,'\u03bb > '+fmt(D.original),A.sx(D.slow-.5)+4,b[1]+10,'left','top','#555');
  S.forEach((r,i)=>poly(c,r.map((v,j)=>[A.sx(j),A.sy(v)]),COL[i],DASH[i],2.2));
  legend(c,wide?b[0]+10:12,wide?b[1]+14:h-D.methods.length*17+2,D.methods);const g={};
  D.methods.forEach((n,i)=>{const v=fmt(S[i][P-1]);(g[v]=g[v]||[]).push(n)});
  return 'factor '+D.factors[f]+', target '+fmt(D.factors[f]*D.original)+' tokens (dynamic evaluated at L = '
    +fmt(D.factors[f]*D.original)+'): the slowest pair turns '+Object.entries(g).map(([v,n])=>v+'\u00d7 slower with '
    +n.join(', ').replace(/, ([^,]*)$/,' and $1')).join('; ')+'; only linear also slows the fastest pair ('
    +fmt(S[0][0])+'\u00d7)'}
"""

BIAS_JS = r"""
function draw(c,w,h,s){const k=s[0],wide=w>=560,X=[0,D.distance.length-1],pw=wide?(w-150)/2:w-76,ph=wide?h-78:(h-156)/2;
  const b1=[60,28,pw,ph],b2=wide?[pw+130,28,pw,ph]:[60,ph+106,pw,ph];
  const A=axes(c,b1,X,[D.low,0],'distance i \u2212 j','bias','ALiBi: \u2212slope \u00b7 distance');
  D.bias.forEach((r,i)=>{if(i!==k)poly(c,r.map((v,j)=>[A.sx(j),A.sy(v)]),'#bbb',[],1)});const e=D.bias[k];
  const y=A.sy(e[X[1]]);poly(c,e.map((v,j)=>[A.sx(j),A.sy(v)]),COL[0],[],3);
  txt(c,'head '+k,b1[0]+b1[2]-4,y<b1[1]+30?y+14:y-14,'right',0,COL[0]);
  const B=axes(c,b2,X,[0,D.buckets_max],'distance i \u2212 j','bucket','T5: bucket (causal, '+(D.buckets_max+1)+')');
  const p=[];D.bucket.forEach((v,j)=>{p.push([B.sx(j-.5),B.sy(v)],[B.sx(j+.5),B.sy(v)])});poly(c,p,COL[1],[],2.5);
  const x=B.sx(D.exact-.5);poly(c,[[x,b2[1]],[x,b2[1]+b2[3]]],'#777',[2,3],1.5);
  txt(c,'\u2190 one bucket per distance',x+5,b2[1]+b2[3]-26,'left','bottom','#555');
  txt(c,'then logarithmic \u2192',x+5,b2[1]+b2[3]-8,'left','bottom','#555');
  const m=D.inverse[k],d=X[1],last=D.bucket.indexOf(D.bucket[d]);
  return 'head '+k+' of '+D.slopes.length+': slope 1/'+fmt(m)+', so the bias drops by 1 every '+fmt(m)
    +' positions, to '+fmt(D.bias[k][d])+' at distance '+d+'. T5 gives distances 0 to '+(D.exact-1)+' a bucket each'
    +' and puts '+last+' to '+d+' all in bucket '+D.bucket[d]}
"""


def sig4(values):
    """``values`` (a number, a tensor or nested lists) rounded to 4 significant digits, as plain floats."""
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return [sig4(v) for v in values]
    return float(f"{values:.4g}")


def number(value: float) -> str:
    """``value`` as a short label: 4 significant digits, thousands separated, no trailing ``.0``."""
    rounded = sig4(value)
    return f"{rounded:,.0f}" if abs(rounded) >= 1e4 or rounded == int(rounded) else f"{rounded:g}"


@dataclass(frozen=True)
class Slider:
    """One range input over the steps ``0 .. len(texts) - 1``; ``texts`` are what a screen reader says."""

    key: str
    label: str
    texts: tuple[str, ...]
    default: int


class Explorable:
    """A figure with sliders: ``text/html`` (live canvas plus static PNG) and a one-line ``text/plain``."""

    def __init__(self, *, name: str, text: tuple[str, str, str], sliders, data: dict, script: str, png: str):
        """``text``: the ``text/plain`` line, the static image's alt text and the caption."""
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name):
            raise ValueError(f"name must be lowercase words joined by '-', got {name!r}")
        self.id, (self.plain, self.alt, self.caption) = f"explore-{name}", text
        self.sliders, self.script, self.png = tuple(sliders), script, png
        self.data = {**data, "T": [list(s.texts) for s in self.sliders], "colors": COLORS, "dashes": DASHES}
        self.html = self._html()

    def __repr__(self) -> str:
        return self.plain

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.html, "text/plain": self.plain}

    def _controls(self) -> str:
        rows = [
            f'<label for="{self.id}-{s.key}" style="font-weight:600">{html.escape(s.label)}</label>'
            f'<input type="range" id="{self.id}-{s.key}" min="0" max="{len(s.texts) - 1}" step="1" value="{s.default}"'
            f' aria-valuetext="{html.escape(s.texts[s.default])}" style="width:100%;margin:0">'
            for s in self.sliders
        ]
        grid = "display:grid;grid-template-columns:max-content minmax(8em,24em);gap:.4em .8em;align-items:center"
        return f'<div style="{grid};margin:.6em 0 .4em">{"".join(rows)}</div>'

    def _html(self) -> str:
        i, alt = self.id, html.escape(self.alt)
        data = json.dumps(self.data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
        return (
            f'<figure class="explorable" id="{i}" style="margin:1em 0;max-width:760px"><style>{CSS}</style>'
            f"<noscript><style>#{i} .explorable-static{{display:block;max-width:100%}}</style></noscript>"
            f'<div class="explorable-live" hidden><canvas id="{i}-canvas" role="img" aria-label="{alt}" width="720" '
            f'height="300" style="display:block;width:100%;max-width:720px;height:300px"></canvas>{self._controls()}'
            f'<output id="{i}-out" for="{" ".join(f"{i}-{s.key}" for s in self.sliders)}" aria-live="polite" '
            f'style="display:block;min-height:2.6em"></output></div><img class="explorable-static" alt="{alt}" '
            f'width="720" height="300" style="max-width:100%;height:auto" src="data:image/png;base64,{self.png}">'
            f'<figcaption style="color:inherit">{html.escape(self.caption)}</figcaption>'
            f'<script type="application/json" id="{i}-data">{data}</script>'
            f"<script>(function(){{const ID='{i}';{JS_HEAD}{self.script}{JS_TAIL}}})();</script></figure>"
        )


def static_png(plot, *args) -> str:
    """Base64 PNG (720 x 300 px) of ``plot(fig, *args)`` in the book's style; no pyplot, no global state."""
    with mpl.rc_context(BOOK_STYLE):
        fig = Figure(figsize=(7.2, 3.0), dpi=100)
        plot(fig, *args)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plot_heatmap(fig, table, wavelengths, base_label: str) -> None:
    ax = fig.add_subplot()
    num_positions, dim = table.shape
    im = ax.imshow(table, aspect="auto", vmin=-1, vmax=1, interpolation="nearest", extent=(0, dim, num_positions, 0))
    ax.set(xlabel="channel", ylabel="position", title=f"PE(position, channel), base {base_label}")
    ax.grid(False)
    for cut in [i for i, lam in enumerate(wavelengths) if lam > num_positions][:1]:  # the first slow pair
        ax.axvline(2 * cut, color="#222", lw=2.5, ls="--")
    fig.colorbar(im, ax=ax, shrink=0.9)


def sinusoidal_base_explorer(num_positions=64, dim=32, bases=BASES, *, default=10_000, name="sinusoidal-base"):
    """Heatmap of :func:`posenc.sinusoidal_table` with a slider over the base; shows the slowest wavelength."""
    bases = [float(b) for b in bases]
    tables = [sinusoidal_table(num_positions, dim, base=b, dtype=F64) for b in bases]  # each [P, d]
    fixed = [torch.round(t * TABLE_SCALE).to(torch.int16).numpy().astype("<i2") for t in tables]  # little-endian
    lam = [sig4(2 * math.pi / sinusoidal_frequencies(dim, base=b)) for b in bases]  # wavelengths, each [d/2]
    labels, k = tuple(number(b) for b in bases), bases.index(float(default))
    data = {"H": [300, 340], "positions": num_positions, "dim": dim, "bases": sig4(bases), "scale": TABLE_SCALE}
    data.update(tables=[base64.b64encode(f.tobytes()).decode("ascii") for f in fixed], wavelengths=lam)
    plain = f"<explorable: sinusoidal encoding heatmap, base {bases[0]:g} to {bases[-1]:.0f}, {len(bases)} steps>"
    alt = (
        f"Heatmap of the sinusoidal encoding for positions 0 to {num_positions - 1} (rows) and {dim} channels "
        f"(columns) with base {labels[k]}: the left channels alternate quickly between red (+1) and blue (-1) "
        f"down the positions, the right ones barely change; the slowest pair's wavelength is {number(lam[k][-1])}."
    )
    caption = "Move the slider to change the base: a larger base slows every pair except the first."
    sliders = [Slider("base", "Base", labels, k)]
    png = static_png(_plot_heatmap, fixed[k] / TABLE_SCALE, lam[k], labels[k])
    return Explorable(name=name, text=(plain, alt, caption), sliders=sliders, data=data, script=SINE_JS, png=png)


def _plot_rotation(fig, qs, ks, dots, mn: tuple[int, int]) -> None:
    (m, n), (ax0, ax1) = mn, fig.subplots(1, 2, width_ratios=[1, 1.5])
    lim = 1.45 * max(math.hypot(*qs[m]), math.hypot(*ks[n]))
    for i, (v, label) in enumerate(((qs[m], f"q at m = {m}"), (ks[n], f"k at n = {n}"))):
        style = {"arrowstyle": "-|>", "color": COLORS[i], "lw": 2.5, "ls": "--" if i else "-", "mutation_scale": 18}
        ax0.annotate("", xy=v, xytext=(0, 0), arrowprops=style)
        ax0.text(v[0] * 1.2, v[1] * 1.2, label, color=COLORS[i], ha="center", va="center")
    ax0.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="channel 0", ylabel="channel 1")
    ax1.scatter([j - i for i in range(len(dots)) for j in range(len(dots))], sum(dots, []), s=10, color="#888")
    ax1.scatter([n - m], [dots[m][n]], s=80, color=COLORS[1], zorder=3)
    ax1.set(xlabel="offset n − m", ylabel="q·k", title=f"q·k of all {len(dots) ** 2} pairs (m, n)")


def rope_rotation_explorer(
    q=(0.8, 0.75), k=(-0.6, -0.65), *, theta=1.0, max_position=15, m=1, n=3, name="rope-rotation"
):
    """One 2-D pair: ``q`` at position ``m`` and ``k`` at ``n``, rotated by :func:`posenc.apply_rope`; q·k per n − m."""
    positions = torch.arange(max_position + 1, dtype=F64)
    cos, sin = rope_cos_sin(positions * theta, 2, layout="interleaved", dtype=F64)  # d = 2: theta_0 = 1, angle p*theta
    qk = torch.tensor([q, k], dtype=F64)[:, None].expand(2, len(positions), 2)  # [2, positions, 2]
    qs, ks = apply_rope(qk, cos, sin, layout="interleaved")  # q and k at every position
    dots = sig4(qs @ ks.T)  # [m, n], from the unrounded vectors
    norm = math.ceil(10 * max(qs[0].norm(), ks[0].norm(), qs[0].norm() * ks[0].norm())) / 10  # axis limit
    data = {"H": [300, 560], "q": sig4(qs), "k": sig4(ks), "dots": dots, "max": max_position, "norm": norm}
    plain = f"<explorable: RoPE rotation of one 2-D pair, q at m and k at n in 0..{max_position}, theta {theta:g} rad>"
    alt = (
        f"Left: the query q at position {m} and the key k at position {n} drawn as arrows from the origin, each "
        f"turned by its position times {theta:g} radian. Right: q·k against the offset n − m for every pair of "
        f"positions from 0 to {max_position}; the pairs fall on one point per offset, "
        f"here {dots[m][n]} at n − m = {n - m}."
    )
    caption = "Move either slider: the arrows turn, but q·k changes only when n − m does."
    steps = tuple(str(p) for p in range(max_position + 1))
    sliders = [Slider("m", "Query position m", steps, m), Slider("n", "Key position n", steps, n)]
    png = static_png(_plot_rotation, sig4(qs), sig4(ks), dots, (m, n))
    return Explorable(name=name, text=(plain, alt, caption), sliders=sliders, data=data, script=ROPE_JS, png=png)


def scaled_inv_freq(method: str, head_dim: int, base: float, original_len: int, factor: float) -> torch.Tensor:
    """``theta'_i`` of one method of chapter 7 for ``factor`` times ``original_len``; dynamic at that length."""
    if method == "NTK-aware":
        return rope_inv_freq(head_dim, base=ntk_scaled_base(base, factor, head_dim))[0]
    common = {"factor": float(factor), "original_max_position_embeddings": original_len}
    scaling = {
        "linear": {"rope_type": "linear", "factor": float(factor)},
        "dynamic": {"rope_type": "dynamic", **common},
        "YaRN": {"rope_type": "yarn", **common},
        "Llama 3": {"rope_type": "llama3", **common, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    }[method]
    seq_len = factor * original_len if method == "dynamic" else None
    return rope_inv_freq(head_dim, base=base, scaling=scaling, seq_len=seq_len)[0]


def _plot_scaling(fig, stretch, slow: int, original_len: int, factor) -> None:
    ax = fig.add_subplot()
    ax.axvspan(slow - 0.5, len(stretch[0]) - 0.5, color="0.93")
    ax.text(slow, 1.05, f"λ > {original_len}", va="bottom", fontsize=9, color="0.35")
    for i, (label, row) in enumerate(zip(SCALING_METHODS, stretch, strict=True)):
        ax.plot(row, color=COLORS[i], ls=(0, DASHES[i]) if DASHES[i] else "-", lw=2, label=label)
    ax.set(yscale="log", xlabel="pair index i", ylabel="stretch θᵢ / θ′ᵢ", title=f"factor {number(factor)}")
    ax.yaxis.set_major_formatter("{x:g}")
    ax.legend(loc="upper left", fontsize=9, handlelength=5)


def rope_scaling_explorer(
    head_dim=128, base=10_000.0, original_len=4096, factors=FACTORS, *, default=4, name="rope-scaling"
):
    """Stretch ``theta_i / theta'_i`` per pair for each scaling of chapter 7, with a slider over the factor."""
    theta, _ = rope_inv_freq(head_dim, base=base)
    stretch = [
        [sig4(theta / scaled_inv_freq(m, head_dim, base, original_len, f)) for f in factors] for m in SCALING_METHODS
    ]
    slow = int((2 * math.pi / theta <= original_len).sum())  # the first pair that never turns once within L0
    top, k = max(max(max(row) for row in method) for method in stretch), list(factors).index(default)
    data = {"H": [320, 420], "methods": SCALING_METHODS, "factors": sig4(list(factors)), "stretch": stretch}
    data.update(original=original_len, slow=slow, ymax=10 ** max(1, math.ceil(math.log10(top))))
    plain = (
        f"<explorable: RoPE scaling stretch, head_dim {head_dim}, base {base:g}, "
        f"factor {number(factors[0])} to {number(factors[-1])}, {len(factors)} steps>"
    )
    alt = (
        f"Line chart, logarithmic y axis: for each of the {head_dim // 2} rotation pairs, how many times slower it "
        f"turns after scaling by factor {number(factors[k])} from {original_len} tokens; linear is flat, NTK-aware, "
        "dynamic, YaRN and Llama 3 leave the fast pairs alone and stretch the slow ones, shaded."
    )
    caption = "Move the slider to change the factor; each method is a colour and a dash pattern."
    sliders = [Slider("factor", "Factor s", tuple(number(f) for f in factors), k)]
    png = static_png(_plot_scaling, [row[k] for row in stretch], slow, original_len, factors[k])
    return Explorable(name=name, text=(plain, alt, caption), sliders=sliders, data=data, script=SCALE_JS, png=png)


def _plot_bias(fig, bias, bucket, head: int, exact: int) -> None:
    ax0, ax1 = fig.subplots(1, 2)
    for h, row in enumerate(bias):
        ax0.plot(row, color=COLORS[0] if h == head else "#bbb", lw=3 if h == head else 1, zorder=3 if h == head else 2)
    ax0.set(xlabel="distance i − j", ylabel="bias", title="ALiBi: −slope · distance")
    ax1.step(range(len(bucket)), bucket, where="mid", color=COLORS[1], lw=2.5)
    ax1.axvline(exact - 0.5, color="#777", ls=":", lw=1.5)
    ax1.set(xlabel="distance i − j", ylabel="bucket", title=f"T5: bucket (causal, {max(bucket) + 1})")


def relative_bias_explorer(num_heads=8, *, max_distance=128, num_buckets=32, head=3, name="relative-bias"):
    """ALiBi's bias against distance for one head (slider), beside T5's causal bucket of each distance."""
    distance = torch.arange(max_distance + 1)
    bias = alibi_bias(num_heads, 1, max_distance + 1, dtype=F64)[:, 0].flip(-1)  # [h, distance]: -m_h * distance
    slopes, inverse = sig4(-bias[:, 1]), sig4(-1 / bias[:, 1])  # m_h, and 1/m_h: positions per unit of bias
    bucket = t5_relative_position_bucket(
        -distance, bidirectional=False, num_buckets=num_buckets, max_distance=max_distance
    )
    bucket, exact = bucket.tolist(), num_buckets // 2  # causal: one bucket per distance below num_buckets / 2
    data = {"H": [300, 560], "distance": distance.tolist(), "bias": sig4(bias), "slopes": slopes, "bucket": bucket}
    data.update(inverse=inverse, low=sig4(bias.min()), buckets_max=num_buckets - 1, exact=exact)
    plain = f"<explorable: ALiBi bias and T5 buckets against distance 0..{max_distance}, {num_heads} heads>"
    alt = (
        f"Left: ALiBi's bias for distances 0 to {max_distance}, one straight falling line per head, head {head} "
        f"(slope 1/{number(inverse[head])}) in bold. Right: T5's causal bucket of each distance, one per distance "
        f"up to {exact - 1}, then wider steps up to bucket {max(bucket)}."
    )
    caption = "Move the slider to pick an ALiBi head; T5's buckets, on the right, are the same for every head."
    sliders = [
        Slider("head", "ALiBi head", tuple(f"head {h}, slope 1/{number(v)}" for h, v in enumerate(inverse)), head)
    ]
    png = static_png(_plot_bias, sig4(bias), bucket, head, exact)
    return Explorable(name=name, text=(plain, alt, caption), sliders=sliders, data=data, script=BIAS_JS, png=png)
