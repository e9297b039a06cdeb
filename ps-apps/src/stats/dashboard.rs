//! The dashboard page: static HTML whose script polls `/stats.json` every second and
//! draws nodes, heartbeats, task queues, throughput and the loss curve. Every value
//! (a node's address, the job's name) is written as text, never parsed as markup.

/// The page.
pub const PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>psrs dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;background:#fafafa;color:#222}
h1{font-size:1.3em;margin:0 0 .2em} .sub{color:#666;margin-bottom:1em}
.cards{display:flex;gap:1em;flex-wrap:wrap;margin-bottom:1em}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.7em 1em;min-width:9em}
.card b{display:block;font-size:1.5em}
table{border-collapse:collapse;background:#fff;margin-bottom:1em}
td,th{border:1px solid #ddd;padding:.3em .7em;text-align:left}
.dead{color:#b00;font-weight:bold} .ok{color:#070}
.bar{display:flex;height:1.2em;width:30em;border:1px solid #ccc;margin-bottom:1em}
.bar div{height:100%} svg{background:#fff;border:1px solid #ddd}
</style></head><body>
<h1>psrs</h1><div class="sub" id="sub">connecting…</div>
<div class="cards">
 <div class="card">examples<b id="ex">–</b></div>
 <div class="card">examples/s<b id="eps">–</b></div>
 <div class="card">loss<b id="loss">–</b></div>
 <div class="card">accuracy<b id="acc">–</b></div>
 <div class="card">model version<b id="ver">–</b></div>
 <div class="card">epoch<b id="ep">–</b></div>
</div>
<h2>Task queues</h2>
<div class="bar" id="bar"></div><div id="queues">no dataset yet</div>
<h2>Loss</h2><svg id="plot" width="600" height="160"></svg>
<h2>Nodes</h2>
<table><thead><tr><th>id</th><th>role</th><th>address</th><th>heartbeat</th><th>state</th></tr></thead>
<tbody id="nodes"></tbody></table>
<div class="sub" id="traffic"></div>
<script>
const $=id=>document.getElementById(id);
const fmt=(v,d=3)=>v==null?'–':(typeof v==='number'?(Math.abs(v)>=1000?v.toFixed(0):v.toFixed(d)):String(v));
// every value reaches the page as text (textContent, attributes), never as markup
function el(tag,cls,text){const e=document.createElement(tag);if(cls)e.className=cls;if(text!=null)e.textContent=String(text);return e}
function svg(tag,attrs,text){const e=document.createElementNS('http://www.w3.org/2000/svg',tag);
 for(const k in attrs)e.setAttribute(k,String(attrs[k]));if(text!=null)e.textContent=String(text);return e}
function plot(h){const s=$('plot');s.replaceChildren();if(!h.length)return;
 const W=600,H=160,xs=h.map(p=>p[0]),ys=h.map(p=>p[1]);
 const x0=Math.min(...xs),x1=Math.max(...xs)||1,y0=Math.min(...ys),y1=Math.max(...ys);
 const X=x=>10+(W-20)*(x-x0)/((x1-x0)||1),Y=y=>H-10-(H-20)*(y-y0)/((y1-y0)||1);
 s.append(svg('polyline',{fill:'none',stroke:'#36c','stroke-width':2,points:h.map(p=>X(p[0])+','+Y(p[1])).join(' ')}),
  svg('text',{x:12,y:14,'font-size':11},fmt(y1)),svg('text',{x:12,y:H-12,'font-size':11},fmt(y0)));}
function seg(n,tot,c){const d=el('div');d.style.width=(100*n/tot)+'%';d.style.background=c;return d}
async function tick(){try{const s=await (await fetch('stats.json')).json();
 const sc=s.scheduler||{};$('sub').textContent=(s.job||'job')+' · up '+s.uptime_s.toFixed(0)+' s · '+(sc.active?'active':'standby')+' scheduler #'+sc.candidate+' at '+sc.addr+', term '+sc.term;
 const t=s.train;$('ex').textContent=t.examples;$('eps').textContent=fmt(t.examples_per_sec,0);
 $('loss').textContent=fmt(t.loss,4);$('acc').textContent=fmt(t.accuracy,4);$('ver').textContent=t.version;
 const q=s.queues;if(q){$('ep').textContent=(q.epoch+1)+' / '+q.num_epochs;
  const tot=q.todo+q.pending+q.done+q.failed||1;
  $('bar').replaceChildren(seg(q.done,tot,'#4a4'),seg(q.pending,tot,'#fa3'),seg(q.todo,tot,'#ccc'),seg(q.failed,tot,'#c33'));
  $('queues').textContent='todo '+q.todo+' · pending '+q.pending+' · done '+q.done+' · failed '+q.failed+' · avg task '+q.avg_task_ms.toFixed(0)+' ms';}
 plot(t.loss_history);
 $('nodes').replaceChildren(...s.nodes.map(n=>{const tr=el('tr');
  const hb=!s.heartbeats?'off':n.heartbeat_age_ms==null?'–':(n.heartbeat_age_ms/1000).toFixed(1)+' s ago';
  for(const v of [n.id,n.role,n.addr,hb])tr.append(el('td',null,v));
  tr.append(el('td',n.dead?'dead':'ok',n.dead?'dead':(n.recovered?'alive (replacement)':'alive')));return tr}));
 const r=s.traffic;$('traffic').textContent='scheduler traffic: sent '+r.sent_msgs+' msgs / '+r.sent_bytes+' B, received '+r.recv_msgs+' msgs / '+r.recv_bytes+' B, malformed '+r.malformed+', resent '+r.resent;
 }catch(e){$('sub').textContent='cannot reach the scheduler: '+e}}
tick();setInterval(tick,1000);
</script></body></html>
"##;

/// Ways a page's script could parse data as markup; none may appear in a page.
pub const MARKUP_SINKS: [&str; 5] = [
    "innerHTML",
    "outerHTML",
    "insertAdjacentHTML",
    "document.write",
    "DOMParser",
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_writes_data_as_text_only() {
        for sink in super::MARKUP_SINKS {
            assert!(!super::PAGE.contains(sink), "{sink}");
        }
    }
}
