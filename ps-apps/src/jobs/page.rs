//! The cluster's dashboard page: static HTML whose script polls `/jobs` and `/workers`
//! every second (and `/stats.json` for the active scheduler and its term) and lists the jobs (kind, state, workers, queries per second,
//! progress, accuracy) and each worker's job and task. The single-job statistics page
//! stays at `/index.html`.

/// The page.
pub const PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>psrs cluster</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;background:#fafafa;color:#222}
h1{font-size:1.3em;margin:0 0 .2em} .sub{color:#666;margin-bottom:1em}
table{border-collapse:collapse;background:#fff;margin-bottom:1em}
td,th{border:1px solid #ddd;padding:.3em .7em;text-align:left}
.failed,.cancelled{color:#b00} .done{color:#070} .running{color:#05a}
progress{width:8em}
</style></head><body>
<h1>psrs cluster</h1><div class="sub" id="sub">connecting…</div>
<h2>Jobs</h2>
<table id="jobs"><thead><tr><th>id</th><th>kind</th><th>model</th><th>state</th><th>workers</th>
<th>queries/s</th><th>s/query</th><th>progress</th><th>accuracy</th><th>error</th></tr></thead><tbody></tbody></table>
<h2>Workers</h2>
<table id="workers"><thead><tr><th>node</th><th>job</th><th>task</th></tr></thead><tbody></tbody></table>
<p><a href="/index.html">node statistics</a> · <a href="/jobs">/jobs</a> · <a href="/stats.json">/stats.json</a></p>
<script>
function cell(tr, text, cls){const td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);return td}
function fix(x,d){return x===null||x===undefined?'–':Number(x).toFixed(d)}
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
   cell(tr,fix(j.accuracy,4));cell(tr,j.error||'');tb.appendChild(tr);
  }
  const ws=await (await fetch('/workers')).json();
  const wb=document.querySelector('#workers tbody');wb.replaceChildren();
  for(const w of ws){const tr=document.createElement('tr');cell(tr,w.id);cell(tr,w.job||'idle');cell(tr,w.task||'–');wb.appendChild(tr)}
  const sc=(await (await fetch('/stats.json')).json()).scheduler||{};
  document.getElementById('sub').textContent=jobs.length+' job(s), '+ws.length+' worker(s); '+(sc.active?'active':'standby')+' scheduler #'+sc.candidate+' at '+sc.addr+', term '+sc.term+'; updated '+new Date().toLocaleTimeString();
 }catch(e){document.getElementById('sub').textContent='cannot reach the scheduler: '+e}
}
poll();setInterval(poll,1000);
</script></body></html>
"##;
