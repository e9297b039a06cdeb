//! The cluster's dashboard page: static HTML whose script polls `/jobs`, `/workers`,
//! `/history` and `/stats.json` every second and draws, without a reload: the jobs
//! (kind, state, workers, queries per second, tasks, passes, loss, accuracy, the error
//! or a running job's last failed query, and for a model run by Python runners on how
//! many workers it is ready and when each had it ready), charts over a shared time axis of each job's
//! queries per second and workers and of each worker's job, charts of each training
//! job's loss and test accuracy per pass, and events (node deaths, scheduler takeovers,
//! jobs submitted and ended) as marked lines on the time axis, and each worker's job,
//! task and the models its runner holds. Charts are drawn with
//! uPlot (MIT), embedded in the binary and served at `/assets/`, so the page needs no
//! internet. The number of points each chart holds is written into `#chart-points`
//! (JSON) for tests. The single-job statistics page stays at `/index.html`.

/// uPlot's script (`assets/uPlot.iife.min.js`, uPlot 1.6.32, MIT: `assets/uPlot.LICENSE`).
pub const UPLOT_JS: &str = include_str!("assets/uPlot.iife.min.js");

/// uPlot's style sheet.
pub const UPLOT_CSS: &str = include_str!("assets/uPlot.min.css");

/// The page.
pub const PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>psrs cluster</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/uPlot.css">
<script src="/assets/uPlot.js"></script>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;background:#fafafa;color:#222}
h1{font-size:1.3em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.2em 0 .4em} .sub{color:#666;margin-bottom:1em}
table{border-collapse:collapse;background:#fff;margin-bottom:1em}
td,th{border:1px solid #ddd;padding:.3em .7em;text-align:left}
.failed,.cancelled{color:#b00} .done{color:#070} .running{color:#05a}
progress{width:8em} .chart{background:#fff;border:1px solid #ddd;margin-bottom:.6em;display:inline-block;vertical-align:top}
.row{display:flex;gap:.6em;flex-wrap:wrap} #timeline{background:#fff;border:1px solid #ddd}
</style></head><body>
<h1>psrs cluster</h1><div class="sub" id="sub">connecting…</div>
<h2>Jobs</h2>
<table id="jobs"><thead><tr><th>id</th><th>kind</th><th>model</th><th>state</th><th>workers</th>
<th>queries/s</th><th>s/query</th><th>progress</th><th>tasks</th><th>passes</th><th>loss</th><th>accuracy</th><th>model ready</th><th>error</th></tr></thead><tbody></tbody></table>
<h2>Over time</h2>
<div class="chart" id="c-qps"></div>
<div class="chart" id="c-workers"></div>
<div><canvas id="timeline" width="900" height="120"></canvas></div>
<h2>Per pass</h2>
<div class="row"><div class="chart" id="c-loss"></div><div class="chart" id="c-acc"></div></div>
<h2>Workers</h2>
<table id="workers"><thead><tr><th>node</th><th>job</th><th>task</th><th>models ready</th><th>loading</th></tr></thead><tbody></tbody></table>
<p><a href="/index.html">node statistics</a> · <a href="/jobs">/jobs</a> · <a href="/history">/history</a> · <a href="/metrics">/metrics</a></p>
<pre id="chart-points" hidden>{}</pre>
<script>
const PALETTE=['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf','#bcbd22','#7f7f7f'];
const color=id=>PALETTE[(parseInt(String(id).replace(/^j/,''))||0)%PALETTE.length];
const EVCOL={'node-dead':'#c00','takeover':'#a0a','submitted':'#888','ended':'#070'};
let hist={t:[],jobs:{},worker_jobs:{},events:[]};
const charts={};
function cell(tr,text,cls){const td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);return td}
function fix(x,d){return x===null||x===undefined?'–':Number(x).toFixed(d)}
// events as dashed vertical lines with their text, on a time chart
function marks(u){const c=u.ctx,dpr=devicePixelRatio||1;c.save();c.font=(10*dpr)+'px sans-serif';
 hist.events.forEach((e,i)=>{const x=u.valToPos(e.t,'x',true);if(x<u.bbox.left||x>u.bbox.left+u.bbox.width)return;
  c.strokeStyle=c.fillStyle=EVCOL[e.kind]||'#888';c.setLineDash([4*dpr,3*dpr]);c.beginPath();c.moveTo(x,u.bbox.top);c.lineTo(x,u.bbox.top+u.bbox.height);c.stroke();
  c.fillText(e.text,x+3*dpr,u.bbox.top+(12+12*(i%4))*dpr)});
 c.restore()}
// makes or updates the uPlot chart `key` with series `names` over data `[x, ...ys]`
function draw(key,title,names,data,opts){const el=document.getElementById(key);
 const sig=names.join(',');let ch=charts[key];
 if(ch&&ch.sig===sig){ch.u.setData(data);return}
 if(ch){ch.u.destroy()}
 const series=[{label:opts.xlabel||'time'}].concat(names.map(n=>({label:n,stroke:color(n),width:2,spanGaps:false,paths:opts.stepped?uPlot.paths.stepped({align:1}):undefined,points:{show:!!opts.points}})));
 const u=new uPlot({title:title,width:Math.min(900,window.innerWidth-60),height:200,series:series,
  scales:{x:{time:!opts.xlabel}},cursor:opts.xlabel?{}:{sync:{key:'cluster-time'}},
  axes:[{},{label:opts.ylabel}],hooks:opts.xlabel?{}:{draw:[marks]}},data,el);
 charts[key]={u:u,sig:sig}}
// a job's model on the workers: how many have it ready, and when each had it (seconds
// after the job's submission); the details in the cell's tooltip
function readyCell(tr,j){const ms=j.models||[];if(!ms.length){cell(tr,'');return}
 const ready=ms.filter(m=>m.ready_ms).map(m=>[m.worker,(m.ready_ms-j.submitted_ms)/1000]).sort((a,b)=>a[1]-b[1]);
 const td=cell(tr,ready.length+' / '+ms.length+(ready.length?' from +'+ready[0][1].toFixed(1)+' s':''));
 td.title=ms.map(m=>'worker '+m.worker+': '+m.state+(m.ready_ms?' at +'+((m.ready_ms-j.submitted_ms)/1000).toFixed(1)+' s':'')+
  ' (load '+fix(m.load_s,1)+' s, CPU '+fix(m.cpu_s,1)+' s, '+fix(m.bytes/1048576,0)+' MB)'+(m.error?' '+m.error:'')).join('\n')}
function points(arr){return arr.filter(v=>v!==null&&v!==undefined).length}
// each worker's job over time: a row per worker, coloured by job
function timeline(){const cv=document.getElementById('timeline'),ws=Object.keys(hist.worker_jobs),t=hist.t;
 const W=Math.min(900,window.innerWidth-60),rowH=16,H=30+rowH*Math.max(ws.length,1);cv.width=W;cv.height=H;
 const c=cv.getContext('2d');c.fillStyle='#fff';c.fillRect(0,0,W,H);c.fillStyle='#222';c.font='12px sans-serif';
 c.fillText("each worker's job",4,12);let n=0;if(t.length<2)return 0;
 const L=70,R=W-10,x=v=>L+(R-L)*(v-t[0])/((t[t.length-1]-t[0])||1);
 ws.forEach((w,r)=>{const y=20+r*rowH;c.fillStyle='#222';c.fillText('worker '+w,4,y+11);
  hist.worker_jobs[w].forEach((j,i)=>{if(!j)return;n++;const x0=x(t[i]),x1=i+1<t.length?x(t[i+1]):R;c.fillStyle=color(j);c.fillRect(x0,y+2,Math.max(x1-x0,1),rowH-4)})});
 for(const e of hist.events){if(e.t<t[0])continue;const ex=x(e.t);c.strokeStyle=EVCOL[e.kind]||'#888';c.setLineDash([4,3]);c.beginPath();c.moveTo(ex,18);c.lineTo(ex,H);c.stroke();c.setLineDash([])}
 return n}
function perPass(jobs,key){const train=jobs.filter(j=>j.kind==='train'&&j.per_pass&&j.per_pass.length);
 const maxp=Math.max(0,...train.map(j=>j.per_pass.length?j.per_pass[j.per_pass.length-1].pass:0));
 const xs=[];for(let p=1;p<=maxp;p++)xs.push(p);
 const ys=train.map(j=>{const m={};for(const p of j.per_pass)m[p.pass]=p[key];return xs.map(p=>m[p]===undefined?null:m[p])});
 return {names:train.map(j=>j.id),data:[xs].concat(ys)}}
async function poll(){
 try{
  const jobs=await (await fetch('/jobs')).json();
  const tb=document.querySelector('#jobs tbody');tb.replaceChildren();
  for(const j of jobs){
   const tr=document.createElement('tr');tr.id='job-'+j.id;
   cell(tr,j.id);cell(tr,j.kind);cell(tr,j.model);cell(tr,j.state,j.state);cell(tr,j.workers);
   cell(tr,fix(j.queries_per_s,2));cell(tr,fix(j.seconds_per_query,3));
   const p=cell(tr,'');const bar=document.createElement('progress');bar.max=1;bar.value=j.progress;p.appendChild(bar);
   p.appendChild(document.createTextNode(' '+Math.round(j.progress*100)+'%'));
   cell(tr,j.tasks_done+' / '+j.tasks_total);cell(tr,j.passes_done+' / '+j.passes);cell(tr,fix(j.loss,4));
   cell(tr,fix(j.accuracy,4));readyCell(tr,j);cell(tr,j.error||(j.last_error?'last: '+j.last_error:''));tb.appendChild(tr);
  }
  const ws=await (await fetch('/workers')).json();
  const wb=document.querySelector('#workers tbody');wb.replaceChildren();
  for(const w of ws){const tr=document.createElement('tr');cell(tr,w.id);cell(tr,w.job||'idle');cell(tr,w.task||'–');
   cell(tr,(w.ready||[]).join(' '));cell(tr,(w.loading||[]).join(' '));wb.appendChild(tr)}
  hist=await (await fetch('/history')).json();
  const ids=Object.keys(hist.jobs);
  draw('c-qps','queries per second',ids,[hist.t].concat(ids.map(i=>hist.jobs[i].queries_per_s)),{ylabel:'queries/s'});
  draw('c-workers','workers per job',ids,[hist.t].concat(ids.map(i=>hist.jobs[i].workers)),{ylabel:'workers',stepped:true});
  const tl=timeline();
  const loss=perPass(jobs,'loss'),acc=perPass(jobs,'accuracy');
  draw('c-loss','training loss per pass',loss.names,loss.data,{xlabel:'pass',ylabel:'loss',points:true});
  draw('c-acc','test accuracy per pass',acc.names,acc.data,{xlabel:'pass',ylabel:'accuracy',points:true});
  const count=(o,k)=>Object.values(o).reduce((s,v)=>s+points(v[k]),0);
  document.getElementById('chart-points').textContent=JSON.stringify({
   samples:hist.t.length,queries_per_s:count(hist.jobs,'queries_per_s'),workers:count(hist.jobs,'workers'),timeline:tl,
   loss:loss.data.slice(1).reduce((s,v)=>s+points(v),0),accuracy:acc.data.slice(1).reduce((s,v)=>s+points(v),0),
   events:hist.events.map(e=>e.kind)});
  const sc=(await (await fetch('/stats.json')).json()).scheduler||{};
  document.getElementById('sub').textContent=jobs.length+' job(s), '+ws.length+' worker(s); '+(sc.active?'active':'standby')+' scheduler #'+sc.candidate+' at '+sc.addr+', term '+sc.term+'; updated '+new Date().toLocaleTimeString();
 }catch(e){document.getElementById('sub').textContent='cannot reach the scheduler: '+e}
}
poll();setInterval(poll,1000);
</script></body></html>
"##;

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_writes_data_as_text_only() {
        for sink in crate::stats::MARKUP_SINKS {
            assert!(!super::PAGE.contains(sink), "{sink}");
        }
    }
}
